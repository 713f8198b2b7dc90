package archives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func open(t *testing.T) (*Store, jetstream.JetStream, context.Context) {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	st, err := Open(ctx, js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	return st, js, ctx
}

func linesOf(entries [][]byte) Lines {
	return func(emit func([]byte) error) error {
		for _, e := range entries {
			if err := emit(e); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestTenThousandEntries: a 10,000-entry transcript reads back byte for
// byte, and its archive is at most a third of its JSONL.
func TestTenThousandEntries(t *testing.T) {
	st, _, ctx := open(t)
	entries := SampleEntries(10_000, 1)
	m := &Meta{ID: "s-10k", Key: "agent:main:big", SessionID: "s-10k", AgentID: "main", Reason: ReasonDeleted, Entry: []byte(`{"key":"agent:main:big"}`)}
	var seen []int
	if err := st.Write(ctx, m, linesOf(entries), func(n int) { seen = append(seen, n) }); err != nil {
		t.Fatal(err)
	}
	want := JSONL(entries)
	if m.Entries != 10_000 || m.Bytes != int64(len(want)) || len(seen) == 0 || seen[len(seen)-1] != 10_000 {
		t.Fatalf("meta %+v progress %v", m, seen)
	}
	var got bytes.Buffer
	rm, err := st.Read(ctx, "s-10k", &got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("read back %d bytes, wrote %d: not identical", got.Len(), len(want))
	}
	if rm.Key != m.Key || rm.Reason != ReasonDeleted || rm.State != StatePending || rm.Entries != 10_000 || string(rm.Entry) != string(m.Entry) {
		t.Fatalf("read meta %+v", rm)
	}
	if m.Compressed*3 > m.Bytes {
		t.Fatalf("archive is %d bytes for %d bytes of JSONL (ratio %.2f): more than a third", m.Compressed, m.Bytes, m.Ratio())
	}
	t.Logf("10k entries: %d bytes JSONL, %d bytes archived, ratio %.2f, %.1f bytes/entry", m.Bytes, m.Compressed, m.Ratio(), float64(m.Compressed)/10_000)
	if err := st.SetState(ctx, "s-10k", StateDone); err != nil {
		t.Fatal(err)
	}
	if f, err := st.Find(ctx, "agent:main:big"); err != nil || f.ID != "s-10k" || f.State != StateDone || f.Digest != m.Digest {
		t.Fatalf("find by key: %+v %v", f, err)
	}
}

// TestCorruptAndTruncated: an object whose bytes no longer decode to what
// was written is an ErrCorrupt naming the archive, never silently short.
func TestCorruptAndTruncated(t *testing.T) {
	st, js, ctx := open(t)
	entries := SampleEntries(300, 2)
	for _, id := range []string{"trunc", "flip"} {
		if err := st.Write(ctx, &Meta{ID: id, Key: "agent:main:" + id, Reason: ReasonReset}, linesOf(entries), nil); err != nil {
			t.Fatal(err)
		}
	}
	obs, err := js.ObjectStore(ctx, "archives")
	if err != nil {
		t.Fatal(err)
	}
	// rewrite each object with damaged bytes, keeping the metadata
	damage := map[string]func([]byte) []byte{
		"trunc": func(b []byte) []byte { return b[:len(b)/2] },
		"flip":  func(b []byte) []byte { c := bytes.Clone(b); c[len(c)/2] ^= 0x55; return c },
	}
	for id, f := range damage {
		info, err := obs.GetInfo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := obs.GetBytes(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: id, Metadata: info.Metadata}, bytes.NewReader(f(raw))); err != nil {
			t.Fatal(err)
		}
		_, err = st.Read(ctx, id, io.Discard)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), id) {
			t.Fatalf("%s: read gave %v, want ErrCorrupt naming it", id, err)
		}
	}
	if _, err := st.Read(ctx, "nope", io.Discard); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := st.Find(ctx, "agent:main:nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("find missing: %v", err)
	}
}

// TestListUsage: List is oldest first; Usage sums sizes.
func TestListUsage(t *testing.T) {
	st, _, ctx := open(t)
	var total int64
	for i := range 3 {
		m := &Meta{ID: fmt.Sprintf("a%d", i), Key: fmt.Sprintf("agent:main:k%d", i), Reason: ReasonDeleted}
		if err := st.Write(ctx, m, linesOf(SampleEntries(50, uint64(i))), nil); err != nil {
			t.Fatal(err)
		}
		total += m.Compressed
	}
	all, err := st.List(ctx)
	if err != nil || len(all) != 3 || all[0].ID != "a0" || all[2].ID != "a2" {
		t.Fatalf("list %v %v", all, err)
	}
	u, _, err := st.Usage(ctx)
	if err != nil || u.Archives != 3 || u.Compressed != total || u.Pending != 3 || u.StoreBytes < uint64(total) {
		t.Fatalf("usage %+v %v", u, err)
	}
	if err := st.Delete(ctx, "a0"); err != nil {
		t.Fatal(err)
	}
	if all, _ := st.List(ctx); len(all) != 2 {
		t.Fatalf("after delete: %d", len(all))
	}
}

// TestTallyKeepsTheOldestDone: Tally's sums are Usage's, and the archive it
// keeps is the oldest done one (pending ones are their operation's record
// and never evicted); an empty store tallies to nothing.
func TestTallyKeepsTheOldestDone(t *testing.T) {
	st, _, ctx := open(t)
	if u, oldest, err := st.Tally(ctx); err != nil || u.Archives != 0 || oldest != nil {
		t.Fatalf("empty store: %+v %v %v", u, oldest, err)
	}
	for i := range 4 {
		m := &Meta{ID: fmt.Sprintf("a%d", i), Key: fmt.Sprintf("agent:main:k%d", i), Reason: ReasonDeleted}
		if err := st.Write(ctx, m, linesOf(SampleEntries(20, uint64(i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a1", "a3"} { // a0, the oldest, stays pending
		if err := st.SetState(ctx, id, StateDone); err != nil {
			t.Fatal(err)
		}
	}
	want, _, err := st.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, oldest, err := st.Tally(ctx)
	if err != nil || u != want || u.Pending != 2 {
		t.Fatalf("tally %+v, usage %+v, %v", u, want, err)
	}
	if oldest == nil || oldest.ID != "a1" || oldest.State != StateDone {
		t.Fatalf("oldest done = %+v", oldest)
	}
	n := 0
	if err := st.Each(ctx, func(*Meta) { n++ }); err != nil || n != 4 {
		t.Fatalf("each saw %d archives, %v", n, err)
	}
}
