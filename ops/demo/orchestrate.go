package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/streams/events"
)

const (
	orchestrator = "agent:main:main"
	chatChannel  = "terminal"
	chatFrom     = "demo-user"
)

// orchestrateScenario: a human asks the main session to plan the release
// notes; its rule spawns three children and yields; their completion
// announces come back to it, one per turn; the demo shows the tree and the
// announce outcomes, the summary the human asks for, and then the notice a
// parent gets when a human writes to one of its children directly.
func orchestrateScenario(ctx context.Context, o Options) (child string, err error) {
	w := o.Out
	since := time.Now().UnixMilli()
	fmt.Fprintf(w, "\n== sub-agents: a human asks the main session (an orchestrator) through the ingress, as `sessionbus chat` does; its rule spawns three children in one turn and yields\n")
	res, err := chat(ctx, o, orchestrator, "Plan the v2 release notes")
	if err != nil {
		return "", err
	}
	if res.Status != "ok" || res.Reply != "" {
		return "", fmt.Errorf("the orchestrator's turn should yield without a reply, got %s %q %s", res.Status, res.Reply, res.Error)
	}
	fmt.Fprintf(w, "(the turn yielded: run %s ended ok without a reply; the children's announces are its next messages)\n", res.RunID)

	children, err := spawnedSince(ctx, o, orchestrator, since)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(w, "\n== the three children run on the gateway and announce their completion to %s (each announce is a run of the orchestrator; its rule answers NO_REPLY)\n", orchestrator)
	done, err := waitAnnounces(ctx, o, children)
	if err != nil {
		return "", err
	}
	delivered := 0
	for _, rec := range done {
		a := rec.Announce
		fmt.Fprintf(w, "%s (%s): outcome %s, announce %s", rec.Label, rec.ChildSessionKey, rec.Outcome, a.State)
		if a.State == subagents.AnnounceDelivered {
			delivered++
			fmt.Fprintf(w, " to %s by gateway %s (run %s)", a.TargetKey, a.Gateway, a.DeliveryRun)
		}
		if a.Error != "" {
			fmt.Fprintf(w, ": %s", a.Error)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "announces delivered: %d of %d\n", delivered, len(done))

	// The registry writes seen above reach the worker's index by its own
	// watch: wait for it, or the list may show a child one write behind.
	if err := o.Deps.Children.Sync(ctx); err != nil {
		return "", err
	}
	if err := listStep(ctx, o); err != nil {
		return "", err
	}

	fmt.Fprintf(w, "\n== the human asks for a summary; the orchestrator's rule calls subagents list and replies with its text\n")
	res, err = chat(ctx, o, orchestrator, "Summarize the children")
	if err != nil {
		return "", err
	}
	fmt.Fprintln(w, res.Reply)

	child = done[0].ChildSessionKey
	return child, noticeScenario(ctx, o, child)
}

// listStep prints `subagents list` as the orchestrator: its text view (the
// tree) and each child's announce state.
func listStep(ctx context.Context, o Options) error {
	w := o.Out
	fmt.Fprintf(w, "\n== the tree, as the orchestrator sees it\n$ sessionbus call --as %s subagents '{\"action\":\"list\"}'\n", orchestrator)
	raw, err := call(ctx, o, orchestrator, "subagents", `{"action":"list"}`)
	if err != nil {
		return err
	}
	type item struct {
		Label    string          `json:"label"`
		Status   string          `json:"status"`
		Announce json.RawMessage `json:"announce"`
	}
	var list struct {
		Text   string `json:"text"`
		Active []item `json:"active"`
		Recent []item `json:"recent"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("subagents list answered %.200s: %w", raw, err)
	}
	fmt.Fprintln(w, list.Text)
	fmt.Fprintln(w, "each child's announce (from the same reply):")
	for _, it := range append(list.Active, list.Recent...) {
		fmt.Fprintf(w, "  %s: status %s, \"announce\": %s\n", it.Label, it.Status, it.Announce)
	}
	return nil
}

// noticeScenario: a human writes to child; the child's parent watches it
// (the spawn seeded the cursor), so the parent gets one notice, which wakes
// it with a run whose rule calls session_status with changesSince.
func noticeScenario(ctx context.Context, o Options, child string) error {
	w := o.Out
	subject := o.Deps.Names.SessionEvent(bus.EncodeKey(orchestrator), events.KindNotice)
	sub, err := o.Conn.SubscribeSync(subject)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := o.Conn.FlushWithContext(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== notices: a human writes to one child directly; its parent %s watches it, so the parent gets one notice on %s\n", orchestrator, subject)
	res, err := chat(ctx, o, child, "Please also check the docs PRs")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, res.Reply)
	msg, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return fmt.Errorf("no notice on %s: %w", subject, err)
	}
	var ev events.Event
	var b notices.Body
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		return fmt.Errorf("notice event %.200s: %w", msg.Data, err)
	}
	if err := json.Unmarshal(ev.Body, &b); err != nil {
		return fmt.Errorf("notice body %.200s: %w", ev.Body, err)
	}
	fmt.Fprintf(w, "%s\n%s\n", msg.Subject, b.Text)

	// The notice's id is the id of the run that wakes the watcher.
	runID := notices.ID(watchers.Notice{Watcher: b.Watcher, Target: b.Target, LastSeenSequence: b.LastSeenSequence})
	fmt.Fprintf(w, "\n== the notice wakes the parent with a run (%s); its rule calls session_status with changesSince %d and replies with the delta\n", runID, b.LastSeenSequence)
	rec, err := o.Deps.Runs.Wait(ctx, runID)
	if err != nil {
		return fmt.Errorf("the parent's notice run %s: %w", runID, err)
	}
	if rec.Status != "ok" {
		return fmt.Errorf("the parent's notice run %s ended %s: %s", runID, rec.Status, rec.Error)
	}
	head, delta, _ := strings.Cut(rec.Reply, "\n")
	fmt.Fprintln(w, head)
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(delta), "", "  "); err != nil {
		fmt.Fprintln(w, delta)
	} else {
		fmt.Fprintf(w, "\"stateChanges\": %s\n", out.String())
	}
	// The gateway acknowledges the notice after the run: the cursor's
	// lastSeen moves to the notified version, and a follow-up notice opens
	// only if more happened meanwhile (the cursor is then pending again).
	c, err := waitAcknowledged(ctx, o, b)
	if err != nil {
		return err
	}
	follow := "none"
	if c.Pending() {
		follow = fmt.Sprintf("one, for changes since %d", c.LastSeenSequence)
	}
	fmt.Fprintf(w, "notice acknowledged: the parent's cursor on the child moved from %d to %d; follow-up notices: %s\n", b.LastSeenSequence, c.LastSeenSequence, follow)
	n, _, err := sub.Pending()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "notices received by %s: %d\n", orchestrator, n+1)
	return nil
}

// waitAcknowledged waits until the watch cursor of notice b moved past the
// version the notice was opened at. The cursors have no change feed of
// their own, so this reads the cursor every 20 ms, within ctx.
func waitAcknowledged(ctx context.Context, o Options, b notices.Body) (*watchers.Cursor, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := o.Deps.Watchers.Get(ctx, b.Watcher, b.Target)
		if err != nil {
			return nil, fmt.Errorf("watch cursor of %s on %s: %w", b.Watcher, b.Target, err)
		}
		if c.LastSeenSequence > b.LastSeenSequence {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the notice to %s about %s was never acknowledged: %w", b.Watcher, b.Target, ctx.Err())
		case <-tick.C:
		}
	}
}

type inboundReply struct {
	Status, RunID, SessionKey, Reply, Error string
}

// chat plays the human, as `sessionbus chat` does: an adapter token minted
// by the operator, one request on the ingress, waiting for the reply.
func chat(ctx context.Context, o Options, key, text string) (*inboundReply, error) {
	fmt.Fprintf(o.Out, "$ sessionbus chat --channel %s --from %s %s %q\n", chatChannel, chatFrom, key, text)
	tok, err := o.Operator.Mint(bus.Caller{Adapter: chatChannel}, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]any{"sessionKey": key, "channel": chatChannel, "from": chatFrom, "text": text, "timeoutSeconds": 60})
	data, err := bus.Inbound(ctx, o.Conn, o.Deps.Names, tok, body)
	if err != nil {
		return nil, fmt.Errorf("chat %s: %w", key, err)
	}
	var res inboundReply
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("chat %s answered %.200s: %w", key, data, err)
	}
	if res.Status != "ok" {
		return nil, fmt.Errorf("chat %s: the turn ended %s: %s", key, res.Status, res.Error)
	}
	return &res, nil
}

func call(ctx context.Context, o Options, as, tool, params string) (json.RawMessage, error) {
	tok, err := o.Operator.Mint(bus.Caller{SessionKey: as}, time.Minute)
	if err != nil {
		return nil, err
	}
	return bus.Call(ctx, o.Conn, o.Deps.Names, tok, tool, []byte(params))
}

// spawnedSince is requester's children created since ms (the demo's own,
// on a data dir that holds earlier runs' children too), oldest first.
func spawnedSince(ctx context.Context, o Options, requester string, ms int64) ([]string, error) {
	if err := o.Deps.Children.Sync(ctx); err != nil {
		return nil, err
	}
	var keys []string
	for _, rec := range o.Deps.Children.Controlled(requester) {
		if rec.CreatedAt >= ms {
			keys = append(keys, rec.ChildSessionKey)
		}
	}
	if len(keys) != 3 {
		return nil, fmt.Errorf("the orchestrator spawned %d children, want 3: %v", len(keys), keys)
	}
	return keys, nil
}

// waitAnnounces follows the child registry until every child's announce
// reached an end state (delivered, skipped or failed), and returns the
// records oldest first.
func waitAnnounces(ctx context.Context, o Options, keys []string) ([]*subagents.Record, error) {
	enc := make([]string, len(keys))
	for i, k := range keys {
		enc[i] = bus.EncodeKey(k)
	}
	kw, err := o.Deps.Subagents.KV().WatchFiltered(ctx, enc)
	if err != nil {
		return nil, err
	}
	defer func() { _ = kw.Stop() }()
	done := map[string]*subagents.Record{}
	for len(done) < len(keys) {
		var e jetstream.KeyValueEntry
		select {
		case e = <-kw.Updates():
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the announces of %v: %w", keys, ctx.Err())
		}
		if e == nil || e.Operation() != jetstream.KeyValuePut {
			continue // nil: the initial values are all in
		}
		var rec subagents.Record
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return nil, fmt.Errorf("registry record %s: %w", e.Key(), err)
		}
		if a := rec.Announce; a != nil && (a.State == subagents.AnnounceDelivered || a.State == subagents.AnnounceSkipped || a.State == subagents.AnnounceFailed) {
			done[rec.ChildSessionKey] = &rec
		}
	}
	out := make([]*subagents.Record, 0, len(done))
	for _, rec := range done {
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ChildSessionKey < out[j].ChildSessionKey
	})
	return out, nil
}
