package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// sessionCmdStack is a server and a worker (handlerstest) holding one
// session per key given, and the admin's credentials file the `session`
// subcommands run with.
type sessionCmdStack struct {
	*handlerstest.Stack
	creds string
}

// startSessionCmd starts the stack with edit applied to the default config
// (may be nil) and creates each key's session for the agent its key names.
func startSessionCmd(t *testing.T, edit func(*config.Config), keys ...string) *sessionCmdStack {
	t.Helper()
	st := handlerstest.Start(t, edit)
	now := time.Now().UnixMilli()
	for _, key := range keys {
		st.Put(&sessions.Entry{Key: key, AgentID: strings.Split(key, ":")[1], SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	}
	return &sessionCmdStack{Stack: st, creds: bustest.AdminCreds(t, st.Server.Deployment(), st.Operator)}
}

// session runs `sessionbus session SUB --server URL --creds FILE args...`
// and returns its exit code, stdout and stderr.
func (s *sessionCmdStack) session(sub string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"session", sub, "--server", s.Server.URL(), "--creds", s.creds}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// stored reads key's entry from the bucket.
func (s *sessionCmdStack) stored(t *testing.T, key string) *sessions.Entry {
	t.Helper()
	e, _, err := s.Worker.Deps.Store.Get(bustest.Context(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
