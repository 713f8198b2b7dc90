package transcripts

import (
	"errors"
	"testing"
)

func TestCursorAppendsThenFlushes(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		from int
	}{{"empty transcript", 0}, {"across a chunk boundary", 62}} {
		t.Run(tc.name, func(t *testing.T) {
			key := "agent.main.cursor" + tc.name[:5]
			f.appendN(key, 0, tc.from)
			c, err := f.tr.OpenCursor(ctx(t), key, false)
			if err != nil {
				t.Fatal(err)
			}
			if c.Len() != uint64(tc.from) {
				t.Fatalf("len %d, want %d", c.Len(), tc.from)
			}
			for i := tc.from; i < tc.from+4; i++ {
				n, dup, err := f.tr.AppendAt(ctx(t), c, key+"/"+string(rune('a'+i-tc.from)), body(key, i))
				if err != nil || dup || n != uint64(i) {
					t.Fatalf("append %d: n %d dup %v err %v", i, n, dup, err)
				}
			}
			f.checkIndex(key, uint64(tc.from)) // the index moves only in Flush
			if err := f.tr.Flush(ctx(t), c); err != nil {
				t.Fatal(err)
			}
			f.checkIndex(key, uint64(tc.from+4))
			f.checkAll(key, uint64(tc.from+4))
			// the cursor goes on after a flush
			if n, _, err := f.tr.AppendAt(ctx(t), c, "", body(key, tc.from+4)); err != nil || n != uint64(tc.from+4) {
				t.Fatalf("append after flush: %d %v", n, err)
			}
			if err := f.tr.Flush(ctx(t), c); err != nil {
				t.Fatal(err)
			}
			f.checkAll(key, uint64(tc.from+5))
		})
	}
}

// A repeated message id is dropped by the server: what a redelivered run
// relies on when its earlier attempt's append landed.
func TestCursorDuplicateMessageID(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.dup"
	f.appendN(key, 0, 2)
	c, err := f.tr.OpenCursor(ctx(t), key, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.tr.AppendAt(ctx(t), c, "run-1.prompt", body(key, 2)); err != nil {
		t.Fatal(err)
	}
	if err := f.tr.Flush(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	again, err := f.tr.OpenCursor(ctx(t), key, false)
	if err != nil {
		t.Fatal(err)
	}
	n, dup, err := f.tr.AppendAt(ctx(t), again, "run-1.prompt", []byte(`{"second":true}`))
	if err != nil || !dup || n != 3 {
		t.Fatalf("repeat: n %d dup %v err %v; want dup at 3", n, dup, err)
	}
	if err := f.tr.Flush(ctx(t), again); err != nil {
		t.Fatal(err)
	}
	f.checkAll(key, 3)
}

// A writer outside the cursor moves the end: AppendAt fails with
// ErrConflict and writes nothing; an exact reopen sees the new end.
func TestCursorConflictAndLaggingIndex(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.conflict"
	f.appendN(key, 0, 3)
	c, err := f.tr.OpenCursor(ctx(t), key, false)
	if err != nil {
		t.Fatal(err)
	}
	f.appendN(key, 3, 1) // someone else
	if _, _, err := f.tr.AppendAt(ctx(t), c, "x", []byte(`{"stale":true}`)); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale cursor append: %v, want ErrConflict", err)
	}
	f.checkAll(key, 4)

	// an orphan the index does not know (a writer died before its index
	// update): the index-only cursor is behind, the exact one is not
	f.rawPublish(key, 4, f.lastSeq(key), 1, false)
	lag, err := f.tr.OpenCursor(ctx(t), key, false)
	if err != nil {
		t.Fatal(err)
	}
	if lag.Len() != 4 {
		t.Fatalf("index-only cursor len %d, want 4", lag.Len())
	}
	if _, _, err := f.tr.AppendAt(ctx(t), lag, "y", body(key, 5)); !errors.Is(err, ErrConflict) {
		t.Fatalf("lagging cursor append: %v, want ErrConflict", err)
	}
	exact, err := f.tr.OpenCursor(ctx(t), key, true)
	if err != nil {
		t.Fatal(err)
	}
	if exact.Len() != 5 {
		t.Fatalf("exact cursor len %d, want 5", exact.Len())
	}
	if n, _, err := f.tr.AppendAt(ctx(t), exact, "y", body(key, 5)); err != nil || n != 5 {
		t.Fatalf("exact append: %d %v", n, err)
	}
	if err := f.tr.Flush(ctx(t), exact); err != nil {
		t.Fatal(err)
	}
	f.checkAll(key, 6)
}

// Flush after another writer indexed entries meanwhile still leaves a
// correct index (the head CAS fails and the repair path takes over).
func TestCursorFlushAfterForeignRepair(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.repair"
	f.appendN(key, 0, 2)
	c, err := f.tr.OpenCursor(ctx(t), key, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.tr.AppendAt(ctx(t), c, "", body(key, 2)); err != nil {
		t.Fatal(err)
	}
	// a reader repairs the lagging index before the writer's Flush
	if n, err := f.tr.Count(ctx(t), key); err != nil || n != 3 {
		t.Fatalf("count %d %v", n, err)
	}
	if err := f.tr.Flush(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	f.checkAll(key, 3)
}

// Top is the newest entry's data as the cursor knows it: read by an exact
// open, unknown after a head-only one, the last entry appended through it,
// kept across Flush; an empty transcript has none.
func TestCursorTop(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.top"
	empty, err := f.tr.OpenCursor(ctx(t), key, true)
	if err != nil {
		t.Fatal(err)
	}
	if data, known := empty.Top(); data != nil || !known {
		t.Fatalf("empty transcript top %q known %v", data, known)
	}
	f.appendN(key, 0, 3)
	head, err := f.tr.OpenCursor(ctx(t), key, false)
	if err != nil {
		t.Fatal(err)
	}
	if data, known := head.Top(); known {
		t.Fatalf("head-only cursor knows top %q", data)
	}
	exact, err := f.tr.OpenCursor(ctx(t), key, true)
	if err != nil {
		t.Fatal(err)
	}
	if data, known := exact.Top(); !known || string(data) != string(body(key, 2)) {
		t.Fatalf("exact cursor top %q known %v, want %q", data, known, body(key, 2))
	}
	if _, _, err := f.tr.AppendAt(ctx(t), exact, "", body(key, 3)); err != nil {
		t.Fatal(err)
	}
	if data, _ := exact.Top(); string(data) != string(body(key, 3)) {
		t.Fatalf("top after append %q", data)
	}
	if err := f.tr.Flush(ctx(t), exact); err != nil {
		t.Fatal(err)
	}
	if data, known := exact.Top(); !known || string(data) != string(body(key, 3)) {
		t.Fatalf("top after flush %q known %v", data, known)
	}
}
