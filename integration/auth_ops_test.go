package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// opsWrite is one way a read-only ops connection could make something
// else publish on a subject it chose: a message it sends (subject, reply,
// body), and the subject a stream captures that it aims at.
type opsWrite struct {
	what, subject, reply, body, target string
}

// The ops role reads; it must not make the server or a worker write into
// any stream. Every request ops may send is answered on the reply subject
// its sender chose, and a push consumer delivers to the subject its
// creator chose: with the JetStream API open to ops, a reply or a delivery
// aimed at a captured subject (a transcript, a bucket key) was stored
// there, as often as ops liked. Each route is tried as an attacker would,
// and nothing may land on any target subject.
func TestAuthOpsStoresNothing(t *testing.T) {
	s, d := authServer(t, auth.DefaultAccount)
	sb := startTenant(t, s, d, auth.DefaultAccount)
	victim := "agent:main:telegram:group:victim"
	sb.seed(t, victim)
	ctx := bustest.Context(t)
	n := sb.names
	// a delivery for a push consumer on SB_DELIVER to carry elsewhere
	if _, err := sb.admin.js.Publish(ctx, n.Deliver("probe"), []byte(`{"text":"probe"}`)); err != nil {
		t.Fatal(err)
	}
	ops := connectRole(t, s, d, auth.DefaultAccount, auth.RoleOps)
	sessionsKV := "$KV." + n.SessionsBucket() + "."
	tr, ds, runs := n.TranscriptsStream(), n.DeliverStream(), n.RunsStream()
	kvs := bus.KVStream(n.SessionsBucket())
	push := func(stream, name, deliver string) string {
		return fmt.Sprintf(`{"stream_name":%q,"config":{"name":%q,"deliver_subject":%q,"deliver_policy":"all","ack_policy":"none"}}`, stream, name, deliver)
	}
	api := n.OpsJSAPI()
	// a pull consumer for ops to pull from (ops may no longer create one
	// through the JetStream API itself)
	if _, err := sb.admin.js.CreateConsumer(ctx, tr, jetstream.ConsumerConfig{Name: "atk0", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
	direct := []opsWrite{
		{"a push consumer on SB_DELIVER delivering into the transcripts", "$JS.API.CONSUMER.CREATE." + ds + ".atk1", "", push(ds, "atk1", n.Transcript("atk1")), n.Transcript("atk1")},
		{"a push consumer on the transcripts delivering into a bucket", "$JS.API.CONSUMER.CREATE." + tr + ".atk2", "", push(tr, "atk2", sessionsKV+"atk2"), sessionsKV + "atk2"},
		{"a push consumer on a bucket delivering into SB_DELIVER", "$JS.API.CONSUMER.CREATE." + kvs + ".atk3", "", push(kvs, "atk3", n.Deliver("atk3")), n.Deliver("atk3")},
		{"account info answered into the transcripts", "$JS.API.INFO", n.Transcript("atk4"), "", n.Transcript("atk4")},
		{"stream names answered into the transcripts", "$JS.API.STREAM.NAMES", n.Transcript("atk5"), "", n.Transcript("atk5")},
		{"stream info answered into a bucket", "$JS.API.STREAM.INFO." + runs, sessionsKV + "atk6", "", sessionsKV + "atk6"},
		{"a message get answered into the transcripts", "$JS.API.STREAM.MSG.GET." + tr, n.Transcript("atk7"), `{"seq":1}`, n.Transcript("atk7")},
		{"a direct get answered into the transcripts", "$JS.API.DIRECT.GET." + kvs, n.Transcript("atk8"), `{"last_by_subj":"` + sessionsKV + bus.EncodeKey(victim) + `"}`, n.Transcript("atk8")},
		{"consumer info answered into SB_DELIVER", "$JS.API.CONSUMER.INFO." + runs + "." + n.GatewaysConsumer(), n.Deliver("atk9"), "", n.Deliver("atk9")},
		{"consumer names answered into the run queue", "$JS.API.CONSUMER.NAMES." + runs, n.Runs("atk10"), "", n.Runs("atk10")},
		{"a pull answered into SB_DELIVER", "$JS.API.CONSUMER.MSG.NEXT." + tr + ".atk0", n.Deliver("atk11"), `{"batch":5}`, n.Deliver("atk11")},
		{"a flow-control reply with a stored reply subject", "$JS.FC." + tr + ".atk12", n.Transcript("atk12"), "", n.Transcript("atk12")},
		{"a micro ping answered into the transcripts", "$SRV.PING", n.Transcript("atk13"), "", n.Transcript("atk13")},
		{"micro stats answered into a bucket", "$SRV.STATS." + bus.ServiceName, sessionsKV + "atk14", "", sessionsKV + "atk14"},
	}
	// each $JS.API request is refused by the server, the $SRV ones by the
	// workers (refused replies)
	// the probe delivery: nothing else writes it while the test runs (a
	// session's transcript may still grow after its turn answered)
	quiet := map[string]uint64{}
	counts(t, sb, quiet, ds, n.Deliver("probe"))
	listen(t, sb, ops, direct)
	sendAll(t, ops, direct)
	waitRefused(t, sb, ops, direct, 2, quiet)

	// The checked JetStream API ops has instead, through a worker: a
	// request whose reply subject is not an inbox is dropped and counted,
	// and so is one with no reply subject (nothing could tell its sender
	// why it was refused).
	viaWorker := []opsWrite{
		{"stream info through the ops API answered into the transcripts", api + ".STREAM.INFO." + runs, n.Transcript("atk15"), "", n.Transcript("atk15")},
		{"a direct get through the ops API answered into a bucket", api + ".DIRECT.GET." + kvs, sessionsKV + "atk16", `{"last_by_subj":"` + sessionsKV + bus.EncodeKey(victim) + `"}`, sessionsKV + "atk16"},
		{"a push consumer through the ops API with no reply", api + ".CONSUMER.CREATE." + ds + ".atk17", "", push(ds, "atk17", n.Transcript("atk17")), n.Transcript("atk17")},
		{"a pull through the ops API answered into SB_DELIVER", api + ".CONSUMER.MSG.NEXT." + tr + ".atk0", n.Deliver("atk18"), `{"batch":5}`, n.Deliver("atk18")},
		{"a pull through the ops API answered to every inbox", api + ".CONSUMER.MSG.NEXT." + tr + ".atk0", "_INBOX.*", `{"batch":5}`, ""},
	}
	sendAll(t, ops, viaWorker)
	waitRefused(t, sb, ops, append(direct, viaWorker...), 2+int64(len(viaWorker)), quiet)

	// With its own inbox as the reply, a consumer that delivers anywhere
	// but an inbox, or an update of a consumer, is refused with an answer
	// that says why.
	opsJS, err := jetstream.NewWithAPIPrefix(ops.Conn, api)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, deliver string }{{"atk19", n.Transcript("atk19")}, {"atk20", sessionsKV + "atk20"}, {"atk21", "_INBOX.*"}} {
		_, err := opsJS.CreateConsumer(ctx, ds, jetstream.ConsumerConfig{Name: c.name, DeliverSubject: c.deliver, AckPolicy: jetstream.AckNonePolicy})
		if err == nil || !strings.Contains(err.Error(), "deliver") {
			t.Fatalf("ops created a push consumer delivering to %s: %v", c.deliver, err)
		}
	}
	if _, err := opsJS.UpdateConsumer(ctx, tr, jetstream.ConsumerConfig{Name: "atk0", AckPolicy: jetstream.AckNonePolicy, Description: "edited"}); err == nil || !strings.Contains(err.Error(), "update") {
		t.Fatalf("ops updated a consumer through its API: %v", err)
	}
	if w := stored(t, sb, quiet); w != "" {
		t.Fatal(w)
	}
	if ops.violated("$JS.FC." + tr + ".atk12") {
		t.Fatal("a flow-control reply was refused: the stock CLI's push consumers need them")
	}

	// what ops is for still works through its API: stream info, a
	// message get, a bucket read, a consumer of its own
	st, err := opsJS.Stream(ctx, tr)
	if err != nil || st.CachedInfo().State.Msgs == 0 {
		t.Fatalf("ops stream info: %v", err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, n.Transcript(bus.EncodeKey(victim))); err != nil {
		t.Fatalf("ops reads the victim's last transcript entry: %v", err)
	}
	kv, err := opsJS.KeyValue(ctx, n.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, bus.EncodeKey(victim)); err != nil {
		t.Fatalf("ops reads a session entry: %v", err)
	}
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ops ordered consumer: %v", err)
	}
	if _, err := oc.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil {
		t.Fatalf("ops reads the transcripts: %v", err)
	}
}

// listen subscribes rc to each target of ws it may subscribe to: a push
// consumer delivers, and a pull or a direct get answers, only while someone
// listens on the subject, and a stream's capture does not count.
func listen(t *testing.T, sb *authTenant, rc *roleConn, ws []opsWrite) {
	t.Helper()
	for _, w := range ws {
		if strings.HasPrefix(w.target, sb.names.Prefix+".") {
			if _, err := rc.SubscribeSync(w.target); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func sendAll(t *testing.T, rc *roleConn, ws []opsWrite) {
	t.Helper()
	for _, w := range ws {
		if err := rc.PublishMsg(&nats.Msg{Subject: w.subject, Reply: w.reply, Data: []byte(w.body)}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRefused waits until the server refused each $JS.API request of ws
// and the tenant's workers refused at least byWorker requests, and fails
// as soon as any of ws stored a message.
func waitRefused(t *testing.T, sb *authTenant, rc *roleConn, ws []opsWrite, byWorker int64, quiet map[string]uint64) {
	t.Helper()
	bustest.WaitFor(t, 20*time.Second, "every route refused", func() bool {
		if w := stored(t, sb, quiet); w != "" {
			t.Fatal(w)
		}
		for _, w := range ws {
			if strings.HasPrefix(w.subject, "$JS.API.") && !rc.violated(w.subject) {
				return false
			}
		}
		return sb.w.RefusedReplies() >= byWorker
	})
	if w := stored(t, sb, quiet); w != "" {
		t.Fatal(w)
	}
}

// stored says what an attack put into a stream, "" when nothing: a
// message on an attacked subject (one with an "atk" token), a message on a
// subject outside its stream's subjects (a consumer delivers a message
// under its own subject, which the capturing stream then stores as is),
// or one more message on a subject nobody else writes during the test.
func stored(t *testing.T, sb *authTenant, quiet map[string]uint64) string {
	t.Helper()
	ctx := bustest.Context(t)
	for name := range sb.admin.js.StreamNames(ctx).Name() {
		st, err := sb.admin.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		for subj, n := range info.State.Subjects {
			if strings.Contains(subj, ".atk") {
				return fmt.Sprintf("%s stored %d message(s) on %s", name, n, subj)
			}
			if !slices.ContainsFunc(info.Config.Subjects, func(f string) bool { return server.SubjectMatchesFilter(subj, f) }) {
				return fmt.Sprintf("%s stored %d message(s) on %s, outside its subjects %v", name, n, subj, info.Config.Subjects)
			}
			if was, ok := quiet[name+" "+subj]; ok && n != was {
				return fmt.Sprintf("%s holds %d messages on %s, not %d", name, n, subj, was)
			}
		}
	}
	return ""
}

// counts is what stored compares quiet subjects with: the messages each
// of subjects holds in stream now.
func counts(t *testing.T, sb *authTenant, into map[string]uint64, stream string, subjects ...string) {
	t.Helper()
	st, err := sb.admin.js.Stream(bustest.Context(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range subjects {
		info, err := st.Info(bustest.Context(t), jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		into[stream+" "+subj] = info.State.Subjects[subj]
	}
}
