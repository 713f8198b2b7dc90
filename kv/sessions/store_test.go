package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

func TestStoreAndIndex(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	names := bus.NewNames("")
	store, err := Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	// idempotent
	if _, err := Open(ctx, js, names); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, &Entry{Key: "agent:main:main", SessionID: "s-main", UpdatedAt: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, &Entry{Key: "agent:main:main"}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	ix, err := StartIndex(ctx, js, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Stop()
	if e := ix.Get("agent:main:main"); e == nil || e.SessionID != "s-main" {
		t.Fatalf("index after start: %+v", e)
	}
	for i := 0; i < 5; i++ {
		if _, err := store.Create(ctx, &Entry{Key: fmt.Sprintf("agent:main:subagent:%d", i), SpawnedBy: "agent:main:main", UpdatedAt: int64(20 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(ix.Children("agent:main:main")); n != 5 {
		t.Fatalf("children = %d, want 5", n)
	}
	// the watch builds the loaded entries' trigram lists before it applies
	// a change, and keeps them with each change after
	ix.mu.RLock()
	built, lists := ix.searching, len(ix.search.lists)
	ix.mu.RUnlock()
	if !built || lists == 0 {
		t.Fatalf("after the load and five changes: trigram lists built %v, %d lists", built, lists)
	}
	var order []string
	ix.Each(func(e *Entry) bool { order = append(order, e.Key); return true })
	if order[0] != "agent:main:subagent:4" || order[len(order)-1] != "agent:main:main" {
		t.Fatalf("order = %v", order)
	}
	// concurrent CAS updates never lose a write
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := store.Update(ctx, "agent:main:main", func(e *Entry) error { e.TotalTokens++; return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	e, _, err := store.Get(ctx, "agent:main:main")
	if err != nil || e.TotalTokens != 8 {
		t.Fatalf("after 8 concurrent updates: %+v %v", e, err)
	}
	if err := store.Delete(ctx, "agent:main:subagent:0"); err != nil {
		t.Fatal(err)
	}
	if err := ix.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if ix.Get("agent:main:subagent:0") != nil || len(ix.Children("agent:main:main")) != 4 {
		t.Fatal("delete not applied to index")
	}
	if got := ix.BySessionID("s-main"); len(got) != 1 || got[0].TotalTokens != 8 {
		t.Fatalf("BySessionID = %+v", got)
	}
	if _, _, err := store.Get(ctx, "agent:main:nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing get: %v", err)
	}
}

// An operator deleting the sessions bucket under a running index empties
// it (it listed the deleted sessions forever before), the bucket comes back
// empty, and what is written to it afterwards is indexed.
func TestIndexFollowsADeletedBucket(t *testing.T) {
	ctx, js, store, ix := indexed(t)
	if _, err := store.Create(ctx, &Entry{Key: "agent:main:a"}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Sync(ctx); err != nil || ix.Get("agent:main:a") == nil {
		t.Fatalf("before: %v", err)
	}
	if err := js.DeleteKeyValue(ctx, "sessions"); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 20*time.Second, "the index to drop the deleted sessions", func() bool { return ix.Len() == 0 })
	bustest.WaitFor(t, 20*time.Second, "the bucket to be recreated", func() bool {
		_, err := store.Create(ctx, &Entry{Key: "agent:main:b"})
		return err == nil
	})
	// the store's create may land before the index has finished its own
	// recreation, whose Sync says so until it has
	bustest.WaitFor(t, 20*time.Second, "the index to follow the recreated bucket", func() bool { return ix.Sync(ctx) == nil })
	if ix.Get("agent:main:b") == nil || ix.Get("agent:main:a") != nil || ix.Len() != 1 {
		t.Fatalf("after recreation: b=%v a=%v len=%d", ix.Get("agent:main:b") != nil, ix.Get("agent:main:a") != nil, ix.Len())
	}
}

// EachLabeled walks the entries with one label, newest first as Each does,
// and follows relabelling and deletion.
func TestIndexEachLabeled(t *testing.T) {
	ctx, _, store, ix := indexed(t)
	for i, e := range []*Entry{
		{Key: "agent:main:a", Label: "x", UpdatedAt: 10},
		{Key: "agent:main:b", Label: "y", UpdatedAt: 20},
		{Key: "agent:main:c", Label: "x", UpdatedAt: 30},
		{Key: "agent:main:d", Label: "x", UpdatedAt: 30},
	} {
		if _, err := store.Create(ctx, e); err != nil {
			t.Fatal(i, err)
		}
	}
	labeled := func(label string) []string {
		if err := ix.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var keys []string
		ix.EachLabeled(label, func(e *Entry) bool { keys = append(keys, e.Key); return true })
		return keys
	}
	if got := fmt.Sprint(labeled("x")); got != "[agent:main:c agent:main:d agent:main:a]" {
		t.Fatalf("label x: %s", got)
	}
	if _, _, err := store.Update(ctx, "agent:main:c", func(e *Entry) error { e.Label = "y"; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "agent:main:a"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(labeled("x"), labeled("y")); got != "[agent:main:d] [agent:main:c agent:main:b]" {
		t.Fatalf("after relabel and delete: %s", got)
	}
}

// indexed starts a server, the sessions bucket and an index over it, all
// stopped when the test ends.
func indexed(t *testing.T) (context.Context, jetstream.JetStream, *Store, *Index) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	store, err := Open(ctx, js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := StartIndex(ctx, js, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Stop)
	return ctx, js, store, ix
}
