package watchers

import "testing"

// TestAckNoticeOnlyThatNotice: acknowledging a notice again after its
// follow-up opened (a redelivered run, a late sweep) leaves the follow-up
// pending; acknowledging the follow-up itself drains it.
func TestAckNoticeOnlyThatNotice(t *testing.T) {
	st, ctx := openStore(t)
	if _, err := st.Seed(ctx, parent, child, 2, Implicit); err != nil {
		t.Fatal(err)
	}
	first, err := st.MarkMaterial(ctx, child, 5, "")
	if err != nil || len(first) != 1 {
		t.Fatalf("open: %v %v", first, err)
	}
	if n, err := st.MarkMaterial(ctx, child, 7, ""); err != nil || len(n) != 0 {
		t.Fatalf("coalesce: %v %v", n, err)
	}
	follow, err := st.AckNotice(ctx, first[0])
	if err != nil || follow == nil || *follow != (Notice{Watcher: parent, Target: child, LastSeenSequence: 5}) {
		t.Fatalf("follow-up %+v %v", follow, err)
	}
	if again, err := st.AckNotice(ctx, first[0]); err != nil || again != nil {
		t.Fatalf("repeated ack: %+v %v", again, err)
	}
	if c, _ := st.Get(ctx, parent, child); !c.Pending() || c.LastSeenSequence != 5 || c.NotifiedSequence != 7 {
		t.Fatalf("the follow-up was acknowledged by the first notice's repeat: %+v", c)
	}
	if n, err := st.AckNotice(ctx, *follow); err != nil || n != nil {
		t.Fatalf("ack follow-up: %+v %v", n, err)
	}
	if c, _ := st.Get(ctx, parent, child); c.Pending() || c.LastSeenSequence != 7 || c.MaterialSequence != 7 {
		t.Fatalf("drained %+v", c)
	}
}
