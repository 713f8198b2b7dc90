package inspect

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/ops/search"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// inspect shows the search index's lag, as the indexer that answers
// reports it; with no indexer the report has none.
func TestReadSearchLag(t *testing.T) {
	s := bustest.Server(t)
	nc, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	names := bus.NewNames("")
	tr, err := transcripts.Open(ctx, nc, js, names)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if rep, err := Read(ctx, js, Options{Names: names}); err != nil || rep.Search != nil {
		t.Fatalf("no indexer: %+v %v", rep.Search, err)
	}
	if _, err := tr.Append(ctx, bus.EncodeKey("agent:main:x"), []byte(`{"role":"user","content":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	in, err := search.Start(ctx, search.Options{NC: nc, JS: js, Names: names, Path: filepath.Join(t.TempDir(), "i.db"), Refresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	svc, err := search.Serve(nc, in)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	var rep *Report
	bustest.WaitFor(t, 10*time.Second, "inspect to report the index caught up", func() bool {
		rep, err = Read(ctx, js, Options{Names: names})
		return err == nil && rep.Search != nil && rep.Search.State == search.StateReady && rep.Search.Applied == 1 && rep.Search.Lag == 0
	})
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "SEARCH INDEX") || !strings.Contains(out.String(), "lag 0") {
		t.Fatalf("text report:\n%s", out.String())
	}
}
