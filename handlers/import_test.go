package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

func TestImportRefusesBadInputWritingNothing(t *testing.T) {
	s := handlerstest.Start(t, nil)
	d := s.Worker.Deps
	for _, c := range []struct {
		key, lines, want string
	}{
		{"", `{"role":"user","content":"x"}`, "sessionKey"},
		{"../../etc", `{"role":"user","content":"x"}`, "invalid"},
		{strings.Repeat("k", 10*1024), `{"role":"user","content":"x"}`, "invalid"},
		{"agent:main:x", "{\"role\":\"user\",\"content\":\"ok\"}\n[1]", "line 2"},
		{"agent:main:x", `{"content":"no role"}`, `no "role"`},
		{"agent:main:x", `{"type":"message"}`, `no "message"`},
	} {
		_, err := handlers.Import(t.Context(), d.Store, d.Transcripts, handlers.ImportOptions{SessionKey: c.key}, strings.NewReader(c.lines), time.Now())
		e, ok := bus.AsError(err)
		if !ok || e.Code != 400 || !strings.Contains(e.Message, c.want) {
			t.Errorf("import %.20q: %v, want a 400 mentioning %q", c.key, err, c.want)
		}
	}
	if err := d.Index.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := d.Index.Len(); n != 0 {
		t.Fatalf("refused imports wrote %d sessions", n)
	}
}
