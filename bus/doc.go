// Package bus holds what every sessionbus process shares on the NATS side,
// below the tools and the stores, with no nats-server code in it (only
// bus/embedded links the server; bus/deps_test.go keeps it so):
//
//   - The tool service: Serve takes every tool request on one queue
//     subscription of `<prefix>.tools.>` (and, when asked, the inbound,
//     schema and session-operation requests), passes it with its verified Caller to the tool's Handler,
//     and answers the NATS micro monitoring subjects (`nats micro info|stats
//     sessionbus`) with true counts. It lets the requests in flight finish
//     on Shutdown, tells a ToolObserver of each answered request, and
//     publishes a Lent result (a reply whose pooled buffer the handler takes
//     back once it is sent).
//   - Names: every subject, stream and bucket name, derived from one
//     prefix (`bus.prefix`, "sb" by default), so two deployments can share
//     an account.
//   - Caller tokens: an Operator mints a signed token saying who calls
//     (Caller: the session key, its agent and run, whether it is sandboxed,
//     or a channel adapter's claim), and a Verifier checks it on every
//     request, refusing the tokens of revoked runs.
//   - Errors: Error carries the numeric code (400, 403, 404, 503, ...) a
//     tool call is refused with; Errorf, BadRequest and AsError build and
//     read them.
//   - Streams and buckets: helpers that open one, creating it when it is
//     missing and leaving an existing one's settings alone, and a Guard that
//     creates one again when an operator deletes it under a running process;
//     the leader-read helpers for replicated streams (LeaderGetRequest,
//     LeaderGetReply).
//   - Ids and keys: DerivedUUID, the name-based ids that make retries
//     idempotent, and EncodeKey/DecodeKey, which map a session key onto the
//     subject and KV key alphabet (`agent:main:main` is `agent.main.main`).
//   - Small client helpers: Call, Inbound, SessionOp and Schema send one
//     request with a token; Marshal is json.Marshal without HTML escaping.
//
// The subpackages hold NATS-level auth (bus/auth), the embedded server and
// cluster (bus/embedded) and test servers (bus/bustest). docs/architecture.md
// shows where bus sits among the packages.
package bus
