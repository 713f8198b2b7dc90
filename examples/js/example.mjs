// Calling sessionbus's session tools from Node.js with the official NATS
// packages: connect, discover the service, list sessions, read a history,
// send and wait for the reply, spawn a sub-agent and receive its announce.
//
//   SESSIONBUS_CREDS="$(sessionbus home --role admin)" \
//   SESSIONBUS_TOKEN=$(sessionbus token --as agent:main:main) node example.mjs
//
// Environment:
//   SESSIONBUS_SERVER   NATS URL (default nats://127.0.0.1:4222)
//   SESSIONBUS_CREDS    NATS credentials file (serve requires one unless run
//                       with --insecure); the example subscribes to its
//                       session's announce subject: the admin role may, an
//                       agent role may not (it receives only its own replies)
//   SESSIONBUS_TOKEN    caller token from `sessionbus token --as KEY` (required)
//   SESSIONBUS_AS       the session key the token speaks for (default agent:main:main)
//   SESSIONBUS_SEND_TO  the session to send to (default agent:main:helper)
//   SESSIONBUS_PREFIX   subject prefix, bus.prefix (default sb)
//
// Output: one line per step, `<step>: <fact>`; exit 1 on any failure.
import { readFileSync } from "node:fs";
import { connect, credsAuthenticator, headers } from "@nats-io/transport-node";
import { ServiceError, Svcm } from "@nats-io/services";

const server = process.env.SESSIONBUS_SERVER || "nats://127.0.0.1:4222";
const token = process.env.SESSIONBUS_TOKEN;
const me = process.env.SESSIONBUS_AS || "agent:main:main";
const sendTo = process.env.SESSIONBUS_SEND_TO || "agent:main:helper";
const prefix = process.env.SESSIONBUS_PREFIX || "sb";
const credsFile = process.env.SESSIONBUS_CREDS;
if (!token) {
  console.error("set SESSIONBUS_TOKEN: SESSIONBUS_TOKEN=$(sessionbus token --as " + me + ")");
  process.exit(2);
}

// call sends one tool request: params as JSON, the caller token in the
// Sessionbus-Token header. A refusal comes back as a NATS service error
// (Nats-Service-Error-Code / Nats-Service-Error headers).
async function call(nc, tool, params, timeoutMs = 10_000) {
  const h = headers();
  h.set("Sessionbus-Token", token);
  const msg = await nc.request(`${prefix}.tools.${tool}`, JSON.stringify(params), { headers: h, timeout: timeoutMs });
  const err = ServiceError.toServiceError(msg);
  if (err) {
    throw new Error(`${tool}: ${err.code} ${err.message}`);
  }
  return msg.json();
}

// encodeKey is sessionbus's subject encoding of a session key (bus.EncodeKey):
// ':' separates tokens, a ':' that would leave an empty token is =3A, and
// every byte outside [-_/a-zA-Z0-9] is =XX.
function encodeKey(key) {
  const bytes = new TextEncoder().encode(key);
  let out = "";
  let tokenLen = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    const ch = String.fromCharCode(c);
    if (ch === ":") {
      const nextEmpty = i + 1 >= bytes.length || bytes[i + 1] === 0x3a;
      if (tokenLen === 0 || nextEmpty) {
        out += "=3A";
        tokenLen += 3;
      } else {
        out += ".";
        tokenLen = 0;
      }
    } else if (/^[-_/a-zA-Z0-9]$/.test(ch)) {
      out += ch;
      tokenLen++;
    } else {
      out += "=" + c.toString(16).toUpperCase().padStart(2, "0");
      tokenLen += 3;
    }
  }
  return out;
}

function text(message) {
  const c = message?.content;
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.filter((b) => b?.type === "text").map((b) => b.text).join(" ");
  return "";
}

async function main() {
  const opts = { servers: server, name: "sessionbus js example" };
  if (credsFile) {
    opts.authenticator = credsAuthenticator(readFileSync(credsFile));
  }
  const nc = await connect(opts);
  console.log(`connected: ${nc.getServer()}`);

  // Discovery: sessionbus is a NATS micro service; its endpoints are the tools.
  const infos = await new Svcm(nc).client().info("sessionbus");
  const tools = new Set();
  for await (const info of infos) {
    for (const ep of info.endpoints) tools.add(ep.name);
  }
  console.log(`service: sessionbus tools ${[...tools].sort().join(",")}`);

  const list = await call(nc, "sessions_list", {});
  console.log(`sessions_list: ${list.count} sessions: ${list.sessions.map((s) => s.key).join(" ")}`);

  const history = await call(nc, "sessions_history", { sessionKey: sendTo, limit: 20 });
  console.log(`sessions_history: ${history.sessionKey} has ${history.messages.length} messages, last: ${text(history.messages.at(-1))}`);

  // Send and wait: the reply comes back in the same call.
  const sent = await call(nc, "sessions_send", { sessionKey: sendTo, message: "ping from js", timeoutSeconds: 60 }, 70_000);
  console.log(`sessions_send: ${sent.status} reply: ${sent.reply}`);

  // Spawn a sub-agent. Its completion is announced to the requester on
  // <prefix>.session.<encoded requester key>.announce (stream SB_EVENTS):
  // subscribe first, then spawn.
  const announces = nc.subscribe(`${prefix}.session.${encodeKey(me)}.announce`);
  const spawned = await call(nc, "sessions_spawn", { task: "summarize the release notes", label: "js-child" });
  console.log(`sessions_spawn: ${spawned.status} child ${spawned.childSessionKey}`);
  const deadline = setTimeout(() => announces.unsubscribe(), 90_000);
  let announced = null;
  for await (const m of announces) {
    const ev = m.json();
    if (ev.kind === "announce" && ev.body?.childSessionKey === spawned.childSessionKey) {
      announced = ev;
      break;
    }
  }
  clearTimeout(deadline);
  if (!announced) {
    throw new Error(`no announce for ${spawned.childSessionKey} within 90s`);
  }
  console.log(`announce: child ${announced.body.childSessionKey} run ${announced.body.childRunId}`);
  const kids = await call(nc, "subagents", { action: "list" });
  const kid = [...(kids.active || []), ...(kids.recent || [])].find((r) => r.sessionKey === spawned.childSessionKey);
  console.log(`subagents: ${spawned.childSessionKey} ${kid ? kid.status : "not listed"}`);
  const childHistory = await call(nc, "sessions_history", { sessionKey: spawned.childSessionKey });
  console.log(`child reply: ${text(childHistory.messages.at(-1))}`);

  await nc.drain();
  console.log("done");
}

main().catch((err) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
