package search

import (
	"fmt"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/archives"
)

// An archived session is searched only when asked: its entries are
// indexed from the archive (redacted as the stream's are), found with
// the archive's id, never twice, and gone once the archive is deleted.
func TestArchivedSearchedWhenAsked(t *testing.T) {
	r := newRig(t)
	r.session("agent:main:old", "the amber cartographer sleeps", "my key is "+secret+" keep it")
	r.session("agent:main:live", "an amber cartographer wakes")
	in := r.start(Options{})
	defer in.Close()
	r.caughtUp(in)
	ctx := bustest.Context(t)
	if _, err := r.ops.Delete(ctx, "agent:main:old", archives.ReasonArchived, nil); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 20*time.Second, "the archived session's entries out of the live search", func() bool {
		return len(r.find(in, "amber cartographer")) == 1
	})
	ask := func(text string) []Hit {
		t.Helper()
		q, err := Parse([]byte(fmt.Sprintf(`{"query":%q,"archived":true}`, text)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := in.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return res.Results
	}
	meta, err := r.ops.Archives.Find(ctx, "agent:main:old")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second ask indexes nothing again
		hits := ask("amber cartographer")
		if len(hits) != 2 {
			t.Fatalf("archived: %d hits %+v, want the live one and the archived one", len(hits), hits)
		}
		var got *Hit
		for i := range hits {
			if hits[i].Archive != "" {
				got = &hits[i]
			}
		}
		if got == nil || got.Archive != meta.ID || got.SessionKey != "agent:main:old" || got.SessionID != meta.SessionID ||
			got.Seq != 0 || got.Entry != 1 || got.Role != "user" {
			t.Fatalf("archived hit %+v: want archive %s of agent:main:old (sessionId %s), entry 1, user", got, meta.ID, meta.SessionID)
		}
	}
	if hits := ask(secret); len(hits) != 0 {
		t.Fatalf("a redacted secret was found in an archive: %+v", hits)
	}
	if hits := ask("keep it"); len(hits) != 1 || hits[0].Archive != meta.ID {
		t.Fatalf("the text around the secret: %+v, want one archived hit", hits)
	}
	if err := r.ops.Archives.Delete(ctx, meta.ID); err != nil {
		t.Fatal(err)
	}
	if hits := ask("amber cartographer"); len(hits) != 1 || hits[0].Archive != "" {
		t.Fatalf("after the archive was deleted: %+v, want the live hit only", hits)
	}
	if n, err := in.Index().Count(ctx); err != nil || n != 1 {
		t.Fatalf("the index holds %d stream entries (%v), want 1", n, err)
	}
}
