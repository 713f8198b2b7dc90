package auth_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/sessionbus/sessionbus/bus"
)

// The two ways a worker could learn who asks, measured on one server in
// operator mode (docs/security.md, "Caller identity"):
//
//   - token: the caller sends Sessionbus-Token in the same account; the
//     worker verifies it (ed25519 once, then a cache hit).
//   - requestinfo: the caller's account imports the tools service with
//     requester info shared; the server attaches Nats-Request-Info (the
//     caller's account and user name) and the worker decodes it.
//
// go test -run '^$' -bench Identity ./bus/auth/
func BenchmarkIdentityToken(b *testing.B) {
	s, svc, caller := identityServer(b, true)
	defer s.Shutdown()
	op, _ := bus.NewOperator()
	v := bus.NewVerifier(op.PublicKey())
	sub, err := svc.Subscribe("sb.tools.sessions_list", func(m *nats.Msg) {
		c, err := v.Verify(m.Header.Get(bus.HeaderToken))
		if err != nil || c.SessionKey == "" {
			_ = m.Respond([]byte("401"))
			return
		}
		_ = m.Respond([]byte(c.SessionKey))
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = svc.Flush()
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Hour)
	// the same account: a second user of the worker's account calls
	runIdentity(b, caller, "sb.tools.sessions_list", tok, "agent:main:main")
}

func BenchmarkIdentityRequestInfo(b *testing.B) {
	s, svc, caller := identityServer(b, false)
	defer s.Shutdown()
	sub, err := svc.Subscribe("sb.tools.sessions_list", func(m *nats.Msg) {
		var ri server.ClientInfo
		if err := json.Unmarshal([]byte(m.Header.Get("Nats-Request-Info")), &ri); err != nil || ri.User == "" {
			_ = m.Respond([]byte("401"))
			return
		}
		_ = m.Respond([]byte(ri.NameTag))
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = svc.Flush()
	runIdentity(b, caller, "sb.tools.sessions_list", "", "agent:main:main")
}

func runIdentity(b *testing.B, nc *nats.Conn, subj, tok, want string) {
	m := nats.NewMsg(subj)
	m.Data = []byte(`{}`)
	if tok != "" {
		m.Header.Set(bus.HeaderToken, tok)
	}
	r, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if string(r.Data) != want {
		b.Fatalf("identity: got %q, want %q", r.Data, want)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// identityServer runs an operator-mode server with account SVC exporting
// sb.tools.> (requester info shared) and account CALLERS importing it; it
// returns a SVC connection and a caller: with token, a second SVC user
// (same account, the token says who asks); else a CALLERS user named like
// a session, whose requests cross the import.
func identityServer(b *testing.B, token bool) (*server.Server, *nats.Conn, *nats.Conn) {
	b.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	mk := func() (nkeys.KeyPair, string) { kp, _ := nkeys.CreateAccount(); p, _ := kp.PublicKey(); return kp, p }
	_, sysPub := mk()
	svcKP, svcPub := mk()
	callKP, callPub := mk()
	oc := jwt.NewOperatorClaims(opub)
	oc.SystemAccount = sysPub
	ojwt, _ := oc.Encode(okp)
	ocl, _ := jwt.DecodeOperatorClaims(ojwt)
	res := &server.MemAccResolver{}
	sys := jwt.NewAccountClaims(sysPub)
	sj, _ := sys.Encode(okp)
	_ = res.Store(sysPub, sj)
	svc := jwt.NewAccountClaims(svcPub)
	svc.Exports.Add(&jwt.Export{Subject: "sb.tools.>", Type: jwt.Service, AllowTrace: false})
	svj, _ := svc.Encode(okp)
	_ = res.Store(svcPub, svj)
	call := jwt.NewAccountClaims(callPub)
	call.Imports.Add(&jwt.Import{Subject: "sb.tools.>", Account: svcPub, Type: jwt.Service, Share: true})
	cj, _ := call.Encode(okp)
	_ = res.Store(callPub, cj)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		TrustedOperators: []*jwt.OperatorClaims{ocl}, SystemAccount: sysPub, AccountResolver: res})
	if err != nil {
		b.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		b.Fatal("server not ready")
	}
	user := func(akp nkeys.KeyPair, name string) *nats.Conn {
		ukp, _ := nkeys.CreateUser()
		upub, _ := ukp.PublicKey()
		uc := jwt.NewUserClaims(upub)
		uc.Name = name
		uj, _ := uc.Encode(akp)
		seed, _ := ukp.Seed()
		nc, err := nats.Connect(s.ClientURL(), nats.UserJWTAndSeed(uj, string(seed)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
	if token {
		return s, user(svcKP, "worker"), user(svcKP, "agent")
	}
	return s, user(svcKP, "worker"), user(callKP, "agent:main:main")
}
