package sessions

import (
	"fmt"
	"testing"
	"unsafe"
)

// Entries share one copy of repeated values, their own strings sit in one
// allocation, and an update that leaves those strings alone keeps the
// previous version's instead of new copies.
func TestIndexSharesAndPacksStrings(t *testing.T) {
	ctx, _, store, ix := indexed(t)
	for i := range 3 {
		if _, err := store.Create(ctx, &Entry{Key: fmt.Sprintf("agent:main:telegram:direct:u%d", i), SessionID: fmt.Sprintf("s-%d", i),
			DisplayName: fmt.Sprintf("user %d", i), Channel: "telegram", Model: "gpt-5.2",
			Origin: &Origin{Provider: "telegram", ChatType: "direct"}, DeliveryContext: &DeliveryContext{Channel: "telegram", To: fmt.Sprintf("u%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Create(ctx, &Entry{Key: "agent:main:x", Origin: &Origin{Provider: "telegram", ChatType: "direct", ThreadID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := ix.Get("agent:main:telegram:direct:u0"), ix.Get("agent:main:telegram:direct:u1")
	if a.Origin != b.Origin || unsafe.StringData(a.Model) != unsafe.StringData(b.Model) || unsafe.StringData(a.Channel) != unsafe.StringData(b.DeliveryContext.Channel) {
		t.Fatal("repeated values are not shared")
	}
	if x := ix.Get("agent:main:x"); x.Origin == a.Origin || x.Origin.ThreadID != "t1" {
		t.Fatalf("an origin with a thread id was shared: %+v", x.Origin)
	}
	// key, sessionId, display name and delivery target are one allocation
	base := uintptr(unsafe.Pointer(unsafe.StringData(a.Key)))
	for _, s := range []string{a.SessionID, a.DisplayName, a.DeliveryContext.To} {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p < base || p >= base+64 {
			t.Fatalf("%q is not packed with the key", s)
		}
	}
	if a.Key != "agent:main:telegram:direct:u0" || a.SessionID != "s-0" || a.DisplayName != "user 0" || a.DeliveryContext.To != "u0" {
		t.Fatalf("packed fields read back wrong: %+v", a)
	}
	_, rev, err := store.Update(ctx, a.Key, func(e *Entry) error { e.TotalTokens = 5; e.DisplayName = "renamed"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.WaitApplied(ctx, rev); err != nil {
		t.Fatal(err)
	}
	a2 := ix.Get(a.Key)
	if a2.TotalTokens != 5 || a2.DisplayName != "renamed" || a2.SessionID != "s-0" {
		t.Fatalf("after update: %+v", a2)
	}
	if unsafe.StringData(a2.Key) != unsafe.StringData(a.Key) || unsafe.StringData(a2.SessionID) != unsafe.StringData(a.SessionID) {
		t.Fatal("an update copied strings it did not change")
	}
}

// Sessions sharing a sessionId come back in the order they were indexed,
// through deletes of the first and of later ones; lineage follows updates.
func TestIndexSharedSessionIDsAndLineage(t *testing.T) {
	ctx, _, store, ix := indexed(t)
	for _, k := range []string{"agent:main:a", "agent:main:b", "agent:main:c"} {
		if _, err := store.Create(ctx, &Entry{Key: k, SessionID: "same", SpawnedBy: "agent:main:main"}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() string {
		if err := ix.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, e := range ix.BySessionID("same") {
			ks = append(ks, e.Key)
		}
		return fmt.Sprint(ks, len(ix.Children("agent:main:main")), ix.IsChild("agent:main:main", "agent:main:b"))
	}
	if got := ids(); got != "[agent:main:a agent:main:b agent:main:c] 3 true" {
		t.Fatal(got)
	}
	if err := store.Delete(ctx, "agent:main:a"); err != nil {
		t.Fatal(err)
	}
	if got := ids(); got != "[agent:main:b agent:main:c] 2 true" {
		t.Fatal(got)
	}
	if _, _, err := store.Update(ctx, "agent:main:b", func(e *Entry) error { e.SpawnedBy = "agent:main:other"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := ids(); got != "[agent:main:c agent:main:b] 1 false" {
		t.Fatal(got)
	}
	if _, err := store.Create(ctx, &Entry{Key: "agent:main:a", SessionID: "same"}); err != nil { // a reused slot
		t.Fatal(err)
	}
	if got := ids(); got != "[agent:main:c agent:main:b agent:main:a] 1 false" {
		t.Fatal(got)
	}
	if ix.IsChild("agent:main:other", "agent:main:b") != true || len(ix.BySessionID("none")) != 0 {
		t.Fatal("lineage of the update or an unknown id")
	}
}
