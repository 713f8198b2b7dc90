// Command hostileagent is an exec agent that tries to get out of its run:
// it uses what the gateway gives it (its environment, stdin, the turn's
// directory) to reach what it must not, and replies with a JSON report of
// what each attempt got. integration/hostile_exec_test.go builds and runs
// it under serve --auth.
//
// Beyond the environment a run gets, it reads HOSTILE_STASH (a directory
// shared by every run: it leaves its credentials and token there for the
// next run to try, and a detached child's report of its lingering
// connection) and HOSTILE_DATA (the data dir, to try to read by path, and
// the gateway's environment: set when the turn runs as another user).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

type input struct {
	SessionKey   string `json:"sessionKey"`
	RunID        string `json:"runId"`
	Message      string `json:"message"`
	NATSURL      string `json:"natsUrl"`
	Token        string `json:"token"`
	ToolsSubject string `json:"toolsSubject"`
	NATSCreds    string `json:"natsCreds"`
	NATSInbox    string `json:"natsInbox"`
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "linger" {
		linger(os.Args[2])
		return
	}
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		reply(map[string]any{"error": "bad stdin: " + err.Error()})
		return
	}
	if strings.HasPrefix(in.Message, "Agent-to-agent announce step") {
		reply(map[string]any{"reply": "ANNOUNCE_SKIP"})
		return
	}
	rep := attempt(in)
	b, _ := json.Marshal(rep)
	// the stash gets it as written: a reply passes the redactor on its way
	// back, which would hide a leaked key from the test
	if stash := os.Getenv("HOSTILE_STASH"); stash != "" {
		_ = os.WriteFile(filepath.Join(stash, in.RunID+".report.json"), b, 0o600)
	}
	reply(map[string]any{"reply": string(b)})
}

func reply(v map[string]any) { _ = json.NewEncoder(os.Stdout).Encode(v) }

// conn is a connection that records the errors the server sends it.
type conn struct {
	*nats.Conn
	mu   sync.Mutex
	errs []string
}

func (c *conn) violation(subject string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, subject) {
			return true
		}
	}
	return false
}

func connect(url string, opts ...nats.Option) (*conn, error) {
	c := &conn{}
	opts = append(opts, nats.PermissionErrOnSubscribe(true), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err.Error())
			c.mu.Unlock()
		}))
	var err error
	c.Conn, err = nats.Connect(url, opts...)
	return c, err
}

func outcome(err error) string {
	if err != nil {
		return "refused: " + err.Error()
	}
	return "allowed"
}

// attempt runs every attempt and returns what each got.
func attempt(in input) map[string]string {
	rep := map[string]string{}
	server := os.Getenv("SESSIONBUS_SERVER")
	stash := os.Getenv("HOSTILE_STASH")

	_, err := connect(server)
	rep["connect_without_creds"] = outcome(err)

	own, err := connect(server, nats.UserCredentials(os.Getenv("SESSIONBUS_CREDS")), nats.CustomInboxPrefix(os.Getenv("SESSIONBUS_INBOX")))
	rep["connect_own"] = outcome(err)
	if err == nil {
		defer own.Close()
		ownAttempts(in, own, rep, stash)
	}
	for _, p := range []string{"sessionbus-data/operator.creds", "sessionbus-data/nats-auth/operator.nk", "../sessionbus-data/operator.creds", "operator.creds"} {
		rep["read_relative "+p] = readOutcome(p)
	}
	// set only when the turn runs as another user than the gateway: the
	// same user may read both, which is what exec.user is for
	if data := os.Getenv("HOSTILE_DATA"); data != "" {
		for _, p := range []string{"operator.creds", "nats-auth/operator.nk", "creds/admin.creds"} {
			rep["read_data "+p] = readOutcome(filepath.Join(data, p))
		}
		rep["read_gateway_environ"] = readOutcome(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
	}
	rep["env"] = strings.Join(os.Environ(), "\n")
	rep["uid"] = fmt.Sprint(os.Getuid())
	if stash != "" {
		stashOwn(in, stash, rep)
	}
	return rep
}

// ownAttempts are the attempts over the run's own connection.
func ownAttempts(in input, own *conn, rep map[string]string, stash string) {
	names := bus.NewNames(strings.TrimSuffix(in.ToolsSubject, ".tools"))
	call := func(token, tool, params string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		data, err := bus.Call(ctx, own.Conn, names, token, tool, []byte(params))
		if e, ok := bus.AsError(err); ok {
			return fmt.Sprintf("refused: %d %s", e.Code, e.Message)
		}
		if err != nil {
			return "refused: " + err.Error()
		}
		return "allowed: " + string(data)
	}
	rep["own_tool_call"] = call(os.Getenv("SESSIONBUS_TOKEN"), "session_status", `{}`)
	rep["own_policy_denied_tool"] = call(os.Getenv("SESSIONBUS_TOKEN"), "sessions_spawn", `{"task":"escape"}`)

	for _, subj := range []string{">", "_INBOX.>", names.Deliver(">"), names.SessionEvent("*", "announce"), names.ToolsGroup() + ".>"} {
		rep["subscribe "+subj] = subscribeOutcome(own, subj)
	}
	for _, subj := range []string{"$JS.API.STREAM.LIST", "$JS.API.STREAM.MSG.GET." + names.TranscriptsStream(), "$JS.API.DIRECT.GET." + names.TranscriptsStream()} {
		rep["request "+subj] = requestOutcome(own, subj, []byte(`{"seq":1}`))
	}
	runs := names.Runs("main")
	_ = own.Publish(runs, []byte(`{"sessionKey":"agent:main:main","message":"forged"}`))
	rep["publish "+runs] = publishOutcome(own, runs)

	entries, _ := os.ReadDir(stash)
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(stash, name)
		switch {
		case strings.HasSuffix(name, ".creds") && !strings.HasPrefix(name, in.RunID):
			c, err := connect(in.NATSURL, nats.UserCredentials(path))
			if err == nil {
				c.Close()
			}
			rep["older_creds "+name] = outcome(err)
		case strings.HasSuffix(name, ".token") && !strings.HasPrefix(name, in.RunID):
			tok, _ := os.ReadFile(path)
			rep["older_token "+name] = call(string(tok), "session_status", `{}`)
		}
	}
}

func subscribeOutcome(c *conn, subj string) string {
	sub, err := c.SubscribeSync(subj)
	if err == nil {
		_, err = sub.NextMsg(3 * time.Second)
	}
	switch {
	case errors.Is(err, nats.ErrPermissionViolation):
		return "refused: permissions violation"
	case errors.Is(err, nats.ErrTimeout):
		return "allowed: subscribed, nothing arrived"
	case err != nil:
		return "refused: " + err.Error()
	}
	return "allowed: received a message"
}

func requestOutcome(c *conn, subj string, data []byte) string {
	msg, err := c.Request(subj, data, time.Second)
	if err == nil {
		return "allowed: " + string(msg.Data)
	}
	return publishOutcome(c, subj)
}

// publishOutcome waits for the server's refusal of a publish to subj.
func publishOutcome(c *conn, subj string) string {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c.violation(subj) {
			return "refused: permissions violation"
		}
		if err := c.FlushTimeout(time.Second); err != nil {
			return "refused: " + err.Error()
		}
	}
	return "allowed: no refusal"
}

func readOutcome(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "refused: " + err.Error()
	}
	return "allowed: " + string(b)
}

// stashOwn leaves the run's credentials and token for the next run, and
// starts a child outside the turn's process group that keeps a connection
// with them past the run's end.
func stashOwn(in input, stash string, rep map[string]string) {
	creds, _ := os.ReadFile(os.Getenv("SESSIONBUS_CREDS"))
	_ = os.WriteFile(filepath.Join(stash, in.RunID+".creds"), creds, 0o600)
	_ = os.WriteFile(filepath.Join(stash, in.RunID+".token"), []byte(os.Getenv("SESSIONBUS_TOKEN")), 0o600)
	if others, _ := filepath.Glob(filepath.Join(stash, "*.linger")); len(others) > 0 {
		return // one lingering child is enough, and the test waits for it
	}
	self, err := os.Executable()
	if err != nil {
		rep["linger"] = err.Error()
		return
	}
	report := filepath.Join(stash, in.RunID+".linger")
	_ = os.WriteFile(report, nil, 0o600) // claimed, empty until the child writes why it closed
	cmd := exec.Command(self, "linger", report)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		rep["linger"] = err.Error()
		return
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	rep["linger"] = strings.TrimSpace(string(buf[:n]))
}

// linger connects as the run and writes to report why its connection
// closed: it outlives the run, so only a revocation ends it.
func linger(report string) {
	closed := make(chan struct{})
	var mu sync.Mutex
	var errs []string
	note := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err.Error())
			mu.Unlock()
		}
	}
	nc, err := nats.Connect(os.Getenv("SESSIONBUS_SERVER"), nats.UserCredentials(os.Getenv("SESSIONBUS_CREDS")),
		nats.CustomInboxPrefix(os.Getenv("SESSIONBUS_INBOX")), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { note(err) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { note(err) }),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		fmt.Println("linger connect: " + err.Error())
		return
	}
	fmt.Println("connected")
	_ = os.Stdout.Close()
	select {
	case <-closed:
		note(nc.LastError())
		mu.Lock()
		_ = os.WriteFile(report, []byte("closed: "+strings.Join(errs, "; ")), 0o600)
		mu.Unlock()
	case <-time.After(2 * time.Minute):
		_ = os.WriteFile(report, []byte("still connected"), 0o600)
		nc.Close()
	}
}
