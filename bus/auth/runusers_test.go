package auth_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
)

// runUsersServer is an embedded server in operator mode and the run-user
// issuer of its account, pushing to it.
func runUsersServer(t *testing.T) (*embedded.Server, *auth.Deployment, *auth.RunUsers) {
	t.Helper()
	d, err := auth.LoadOrCreate(t.TempDir(), auth.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Auth: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	ru, err := d.RunUsers(auth.DefaultAccount, "", s.UpdateAccount)
	if err != nil {
		t.Fatal(err)
	}
	return s, d, ru
}

// connectCreds connects as the user of a credentials file, over TCP as the
// run's process would; errs collects what the server sends it.
func connectCreds(t *testing.T, s *embedded.Server, creds []byte, inbox string, errs *errList) (*nats.Conn, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := []nats.Option{nats.UserCredentials(path), nats.CustomInboxPrefix(inbox), nats.MaxReconnects(-1), nats.ReconnectWait(10 * time.Millisecond)}
	if errs == nil {
		errs = &errList{}
	}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs.add(err) }))
	nc, err := nats.Connect(s.URL(), opts...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

type errList struct {
	mu   sync.Mutex
	errs []string
}

func (l *errList) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err.Error())
}

func (l *errList) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		if strings.Contains(strings.ToLower(e), s) {
			return true
		}
	}
	return false
}

func isAuthViolation(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}

// A run's user has the agent role's permissions and its own inbox, its JWT
// expires after the lifetime asked for, and revoking it closes its live
// connection and refuses its credentials from then on, while another run's
// user and the deployment's own connections go on.
func TestRunUserRevoked(t *testing.T) {
	s, d, ru := runUsersServer(t)
	admin, err := d.Mint(auth.DefaultAccount, auth.RoleAdmin, "admin", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	adminNC, err := nats.Connect(s.URL(), admin.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adminNC.Close()

	creds1, inbox1, revoke1, err := ru.Issue("run-1", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.ParseDecoratedJWT(creds1)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	if inbox1 != auth.InboxPrefix(uc.Subject) || uc.Name != "run run-1" || !uc.Tags.Contains("role:agent") {
		t.Fatalf("run user: inbox %s, name %q, tags %v", inbox1, uc.Name, uc.Tags)
	}
	if left := time.Until(time.Unix(uc.Expires, 0)); left < 80*time.Second || left > 91*time.Second {
		t.Fatalf("run user expires in %v, want 90s", left)
	}
	if got, want := fmt.Sprint(uc.Permissions), fmt.Sprint(auth.Permissions(auth.RoleAgent, bus.NewNames(""), inbox1)); got != want {
		t.Fatalf("run user permissions %s, want the agent role's %s", got, want)
	}

	var errs1 errList
	nc1, err := connectCreds(t, s, creds1, inbox1, &errs1)
	if err != nil {
		t.Fatalf("connect as the run: %v", err)
	}
	if _, err := nc1.SubscribeSync(inbox1 + ".x"); err != nil {
		t.Fatal(err)
	}
	if _, err := nc1.SubscribeSync(">"); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 10*time.Second, "the run's subscription to > refused", func() bool { return errs1.has("permissions violation") })

	creds2, inbox2, revoke2, err := ru.Issue("run-2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	nc2, err := connectCreds(t, s, creds2, inbox2, nil)
	if err != nil {
		t.Fatal(err)
	}

	if err := revoke1(); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 10*time.Second, "the revoked run's connection closed", func() bool {
		return !nc1.IsConnected() && errs1.has("revoked")
	})
	if _, err := connectCreds(t, s, creds1, inbox1, nil); !isAuthViolation(err) {
		t.Fatalf("connect with a revoked run's credentials: %v", err)
	}
	if nc1.IsConnected() {
		t.Fatal("the revoked run reconnected")
	}
	for name, nc := range map[string]*nats.Conn{"the other run": nc2, "admin": adminNC} {
		if err := nc.FlushTimeout(10 * time.Second); err != nil || !nc.IsConnected() {
			t.Fatalf("%s lost its connection: %v", name, err)
		}
	}
	if err := revoke1(); err != nil || ru.Revoked() != 1 {
		t.Fatalf("second revoke: %v, %d revoked", err, ru.Revoked())
	}
	if err := revoke2(); err != nil || ru.Revoked() != 2 {
		t.Fatalf("revoke run 2: %v, %d revoked", err, ru.Revoked())
	}
	bustest.WaitFor(t, 10*time.Second, "run 2 closed", func() bool { return !nc2.IsConnected() })
	if _, err := connectCreds(t, s, creds1, inbox1, nil); !isAuthViolation(err) {
		t.Fatalf("run 1 let in again after run 2's revocation: %v", err)
	}
}

// Runs ending at once each revoke their user: none of the concurrent
// updates of the account drops another's entry.
func TestRunUsersRevokeConcurrently(t *testing.T) {
	s, _, ru := runUsersServer(t)
	const n = 12
	type issued struct {
		creds  []byte
		inbox  string
		revoke func() error
	}
	users := make([]issued, n)
	for i := range users {
		c, in, rv, err := ru.Issue(fmt.Sprintf("run-%d", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		users[i] = issued{c, in, rv}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, u := range users {
		wg.Go(func() { errs <- u.revoke() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range users {
		if _, err := connectCreds(t, s, u.creds, u.inbox, nil); !isAuthViolation(err) {
			t.Fatalf("run %d connects after its revocation: %v", i, err)
		}
	}
	if ru.Revoked() != n {
		t.Fatalf("%d revoked, want %d", ru.Revoked(), n)
	}
}

// A push that fails is an error naming the fallback (the JWT's expiry).
func TestRunUsersPushFails(t *testing.T) {
	d, err := auth.LoadOrCreate(t.TempDir(), auth.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	ru, err := d.RunUsers(auth.DefaultAccount, "", func(string) error { return errors.New("server gone") })
	if err != nil {
		t.Fatal(err)
	}
	_, _, revoke, err := ru.Issue("run-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := revoke(); err == nil || !strings.Contains(err.Error(), "server gone") || !strings.Contains(err.Error(), "until its JWT expires") {
		t.Fatalf("revoke with a failing push: %v", err)
	}
	if _, _, _, err := ru.Issue("run-2", 0); err == nil {
		t.Fatal("a run user without a lifetime was issued")
	}
	if _, err := d.RunUsers("NOPE", "", func(string) error { return nil }); err == nil {
		t.Fatal("run users of an unknown account")
	}
}

// On serve --cluster's embedded cluster, a revocation reaches every node:
// a run's user connected to each node is cut off, and connects to any
// node are refused afterwards, also on a node that was stopped while the
// revocation was pushed and started again.
func TestRunUserRevokedOnEveryClusterNode(t *testing.T) {
	c := bustest.NewCluster(t, 3)
	ru, err := c.Deployment().RunUsers(auth.DefaultAccount, "", c.UpdateAccount)
	if err != nil {
		t.Fatal(err)
	}
	creds, inbox, revoke, err := ru.Issue("run-c", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := []nats.Option{nats.UserCredentials(path), nats.CustomInboxPrefix(inbox), nats.NoReconnect()}
	var conns []*nats.Conn
	for i := range 2 { // nodes 1 and 2 stay up; node 3 is down during the revocation
		nc, err := nats.Connect(c.URL(i), opts...)
		if err != nil {
			t.Fatalf("connect to node %d: %v", i+1, err)
		}
		t.Cleanup(nc.Close)
		conns = append(conns, nc)
	}
	c.Stop(2)
	if err := revoke(); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 10*time.Second, "the run's connections on every running node closed", func() bool {
		return conns[0].IsClosed() && conns[1].IsClosed()
	})
	if err := c.Start(2); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if nc, err := nats.Connect(c.URL(i), opts...); err == nil {
			nc.Close()
			t.Fatalf("node %d let a revoked run user connect", i+1)
		}
	}
}
