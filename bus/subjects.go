package bus

import "strings"

// DefaultPrefix is the subject prefix of a deployment (`bus.prefix`); every
// subject and JetStream object name below is relative to it.
const DefaultPrefix = "sb"

// ServiceName is the micro service name, so `nats micro ls/info/stats sessionbus` work.
const ServiceName = "sessionbus"

// Names derives every subject, stream and bucket name from one prefix, so two
// deployments can share a NATS account without colliding.
type Names struct {
	Prefix string
}

// NewNames returns the names for prefix (DefaultPrefix when empty).
func NewNames(prefix string) Names {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Names{Prefix: prefix}
}

func (n Names) p() string {
	if n.Prefix == "" {
		return DefaultPrefix
	}
	return n.Prefix
}

// ToolsGroup is the subject prefix under which every tool endpoint lives.
func (n Names) ToolsGroup() string { return n.p() + ".tools" }

// Tool is the request subject of one tool.
func (n Names) Tool(tool string) string { return n.ToolsGroup() + "." + tool }

// Schema is the subject answering the tool schemas in OpenAI
// function-calling format, filtered by the caller's tool policy.
func (n Names) Schema() string { return n.p() + ".schema" }

// Transcript is the subject holding the transcript entries of one encoded session key.
func (n Names) Transcript(encKey string) string { return n.p() + ".tr." + encKey }

// TranscriptsStream is the stream of every transcript.
func (n Names) TranscriptsStream() string { return n.stream("TRANSCRIPTS") }

// Signal is the signal-log subject of one encoded session key.
func (n Names) Signal(encKey string) string { return n.p() + ".sig." + encKey }

// SignalsStream is the stream of the signal log.
func (n Names) SignalsStream() string { return n.stream("SIGNALS") }

// Runs is the run-request subject of one agent.
func (n Names) Runs(agentID string) string { return n.p() + ".runs." + agentID }

// RunsStream is the stream of run requests (see streams.OpenRuns).
func (n Names) RunsStream() string { return n.stream("RUNS") }

// SessionEvent is the notice/announce subject of one encoded session key.
func (n Names) SessionEvent(encKey, kind string) string {
	return n.p() + ".session." + encKey + "." + kind
}

// SessionEvents matches every notice and announce subject.
func (n Names) SessionEvents() string { return n.p() + ".session.>" }

// EventsStream captures notices and announces.
func (n Names) EventsStream() string { return n.stream("EVENTS") }

// Deliver is the outbound subject of a channel adapter.
func (n Names) Deliver(channel string) string { return n.p() + ".deliver." + channel }

// DeliverStream captures every outbound delivery.
func (n Names) DeliverStream() string { return n.stream("DELIVER") }

// DeadLetter is where a channel adapter records a delivery it gave up on.
func (n Names) DeadLetter(channel string) string { return n.p() + ".deadletter." + channel }

// DeadLetterStream captures the dead letters of every channel.
func (n Names) DeadLetterStream() string { return n.stream("DEADLETTER") }

// GatewaysConsumer is the durable pull consumer on RunsStream that every
// gateway replica shares.
func (n Names) GatewaysConsumer() string { return "gateways" }

// SessionsBucket holds the session entries.
func (n Names) SessionsBucket() string { return n.Bucket("sessions") }

// RunsBucket holds the run records.
func (n Names) RunsBucket() string { return n.Bucket("runs") }

// A2ABucket holds the progress of agent-to-agent flows.
func (n Names) A2ABucket() string { return n.Bucket("a2a") }

// TranscriptIndexBucket holds the transcript entry-to-sequence index.
func (n Names) TranscriptIndexBucket() string { return n.Bucket("trindex") }

// SubagentsBucket holds the child registry: one record per spawned
// sub-agent session (its run, requester, outcome and announce delivery).
func (n Names) SubagentsBucket() string { return n.Bucket("subagents") }

// ThreadBindingsBucket holds the thread bindings: which sub-agent session a
// channel conversation (or thread in it) is bound to.
func (n Names) ThreadBindingsBucket() string { return n.Bucket("threadbindings") }

// ClaimsBucket holds exactly-once delivery claims (per-key TTL): the one
// gateway that created a claim delivers the announce or notice it names.
func (n Names) ClaimsBucket() string { return n.Bucket("claims") }

// SignalHeadsBucket holds each session's signal-log head (its last
// sequence and the pruned watermark).
func (n Names) SignalHeadsBucket() string { return n.Bucket("sigheads") }

// WatchersBucket holds the watch cursors (watcher -> target) of parent
// notices.
func (n Names) WatchersBucket() string { return n.Bucket("watchers") }

// ArchivesBucket is the object store of archived transcripts (zstd
// JSONL of deleted, reset and archived sessions).
func (n Names) ArchivesBucket() string { return n.Bucket("archives") }

// SessionOp is the request subject of a session lifecycle operation
// (delete, reset) for ops and channel adapters.
func (n Names) SessionOp(op string) string { return n.p() + ".ops.session." + op }

// Search is the request subject of the transcript search (ops/search):
// ops and admin ask it, the indexers answer in one queue group.
func (n Names) Search() string { return n.p() + ".ops.search" }

// Inbound is the request subject a channel adapter brings a human turn in on.
func (n Names) Inbound() string { return n.p() + ".inbound" }

// Bucket names a KV bucket or object store. With the default prefix a bucket
// is named by its noun alone (`sessions`, `runs`, ...); another prefix is
// put in front (`<prefix>_sessions`).
func (n Names) Bucket(name string) string {
	if n.p() == DefaultPrefix {
		return name
	}
	return n.p() + "_" + name
}

// CronJobsBucket holds the cron jobs and their run history (kv/cronjobs).
func (n Names) CronJobsBucket() string { return n.Bucket("cronjobs") }

// CronStream holds each cron job's schedule (one scheduled message) and
// the ticks the server publishes from it (streams/crontick).
func (n Names) CronStream() string { return n.stream("CRON") }

// CronSchedule is the subject of job's scheduled message.
func (n Names) CronSchedule(jobID string) string { return n.p() + ".cron.sched." + jobID }

// CronTick is the subject the server publishes job's ticks to.
func (n Names) CronTick(jobID string) string { return n.p() + ".cron.tick." + jobID }

// CronOp is the ops subject of a cron operation (add, list, ...).
func (n Names) CronOp(op string) string { return n.p() + ".ops.cron." + op }

// KVStream is the stream that backs a KV bucket (JetStream's own naming).
func KVStream(bucket string) string { return "KV_" + bucket }

func (n Names) stream(name string) string {
	return strings.ToUpper(n.p()) + "_" + name
}

// OpsJSAPI is the JetStream API prefix of the read-only ops role
// (`nats --js-api-prefix`): a worker checks each request and passes it on
// to $JS.API, so no answer or delivery goes anywhere but an inbox.
func (n Names) OpsJSAPI() string { return n.p() + ".ops.js" }
