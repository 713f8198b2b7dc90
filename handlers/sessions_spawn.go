package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/schema"
	"github.com/sessionbus/sessionbus/spawns"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// sessions_spawn: reference §1.4, §5.1-§5.3; documented in docs/tools.md
// and docs/subagents.md ("Spawn", "Creation design").

const (
	spawnToolName    = "sessions_spawn"
	spawnLane        = "subagent"
	runtimeSubagent  = "subagent"
	runtimeACP       = "acp"
	spawnModeRun     = "run"
	spawnModeSession = "session"
	cleanupDelete    = "delete"
	cleanupKeep      = "keep"
	sandboxInherit   = "inherit"
	sandboxRequire   = "require"
	contextFork      = "fork"
	contextIsolated  = "isolated"
)

// Attachment limits. The reference caps the count at 50; the byte limits
// are ours: the whole tool call travels as one NATS message (1 MiB by
// default) with base64 content a third larger than its bytes, and each
// file becomes one transcript entry of the child.
const (
	maxSpawnAttachments     = 50
	maxAttachmentFileBytes  = 256 << 10 // decoded bytes of one file
	maxAttachmentTotalBytes = 512 << 10 // decoded bytes of all files
	maxAttachmentNameBytes  = 255
)

// ThinkingLevels are OpenClaw's think levels, in the order the errors list
// them: what sessions_spawn may give a child and session_status may set.
// sessionbus has no model catalog saying which levels a model supports, so
// every model accepts them all.
var ThinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}

// The reference's literals.
const (
	// SubagentSpawnAcceptedNote is the note of an accepted run-mode spawn
	// (none for cron requesters).
	SubagentSpawnAcceptedNote = "Auto-announce is push-based. After spawning children, do NOT call sessions_list, sessions_history, exec sleep, or any polling tool. Wait for completion events to arrive as user messages, track expected child session keys, and only send your final answer after ALL expected completions arrive. If a child completion event arrives AFTER your final answer, reply ONLY with NO_REPLY."
	spawnSessionModeNote      = "thread-bound session stays active after this task; continue in-thread for follow-ups."

	errSpawnLightContextACP  = "lightContext is only supported for runtime='subagent'."
	errSpawnForkACP          = `context="fork" is only supported for runtime="subagent".`
	errSpawnSessionNoThread  = `mode="session" requires thread=true so the subagent can stay bound to a thread.`
	errSpawnRequireAgentID   = "sessions_spawn requires explicit agentId when requireAgentId is configured. Use agents_list to see allowed agent ids."
	errSpawnSandboxInherit   = "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime."
	errSpawnSandboxRequire   = `sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox="inherit".`
	spawnContextLine         = "[Subagent Context] You are running as a subagent (depth %d/%d). Results auto-announce to your requester; do not busy-poll for status."
	spawnPersistentLine      = "[Subagent Context] This subagent session is persistent and remains available for thread follow-up messages."
	spawnTaskPrefix          = "[Subagent Task]: "
	spawnAttachmentsDirFmt   = ".openclaw/attachments/%s"
	spawnAttachmentEntryHead = "[Subagent Attachment] %s (%d bytes, sha256 %s%s, encoding %s)"
)

// spawnRejectedKeys are the channel-delivery keys sessions_spawn refuses
// (thrown), in the reference's order.
var spawnRejectedKeys = []string{"target", "transport", "channel", "to", "threadId", "thread_id", "replyTo", "reply_to"}

// Spawn steps a test hook (Deps.SpawnHook) may interrupt.
const (
	SpawnStepTranscript = "transcript" // fork copy and attachments, before the commit point
	SpawnStepRegistry   = "registry"   // the registry record: the commit point
	SpawnStepEntry      = "entry"      // the child's session entry
	SpawnStepRunRecord  = "run-record" // the pending run record
	SpawnStepPublish    = "publish"    // the run request on SB_RUNS
)

type spawnAttachment struct {
	name, mimeType, encoding string
	content                  string // as sent
	bytes                    int
	sha256                   string
}

type spawnParams struct {
	task, label, runtime, agentID, model, thinking, cwd string
	hasAgent, hasThinking                               bool
	runTimeout                                          int
	hasTimeout                                          bool
	thread, lightContext                                bool
	mode, cleanup, sandbox, context                     string
	hasMode, hasCleanup, hasContext                     bool
	streamTo, resumeSessionID                           string
	attachments                                         []spawnAttachment
	hasAttachments                                      bool
	mountPath                                           string
	idempotencyKey                                      string
}

// spawnResult is every result shape of sessions_spawn.
type spawnResult = schema.SessionsSpawnResult

type spawnAttachSummary = schema.SpawnAttachSummary

type spawnAttachFile = schema.SpawnAttachFile

func spawnFail(status, msg string) *spawnResult { return &spawnResult{Status: status, Error: msg} }

// enumParam reads a string parameter that must be one of values
// (case-insensitive); absent gives def.
func enumParam(p rules.Params, name, def string, values ...string) (string, bool, error) {
	s, ok, err := p.String(name)
	if err != nil || !ok {
		return def, false, err
	}
	v := strings.ToLower(s)
	if slices.Contains(values, v) {
		return v, true, nil
	}
	quoted := make([]string, len(values))
	for i, x := range values {
		quoted[i] = strconv.Quote(x)
	}
	return "", false, badRequest(fmt.Sprintf("%s must be %s (got %s)", name, strings.Join(quoted, " or "), strconv.Quote(s)))
}

// seconds reads a non-negative number of seconds the reference's way:
// finite numbers are floored. A negative value, or anything but a number
// (or a string holding one), is refused.
func seconds(p rules.Params, name string) (int, bool, error) {
	raw, ok := p.Raw(name)
	if !ok {
		return 0, false, nil
	}
	msg := name + " must be a non-negative number of seconds (0 = no timeout)"
	var f float64
	switch v := raw.(type) {
	case json.Number:
		x, err := v.Float64()
		if err != nil {
			return 0, false, badRequest(msg)
		}
		f = x
	case float64:
		f = v
	case int:
		f = float64(v)
	case string:
		t := strings.TrimSpace(v)
		if t == "" {
			return 0, false, nil
		}
		x, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return 0, false, badRequest(msg)
		}
		f = x
	default:
		return 0, false, badRequest(msg)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > math.MaxInt32 {
		return 0, false, badRequest(msg)
	}
	return int(math.Floor(f)), true, nil
}

func readSpawnParams(p rules.Params) (spawnParams, error) {
	var sp spawnParams
	var err error
	for _, k := range spawnRejectedKeys {
		if _, ok := p[k]; ok {
			return sp, badRequest(fmt.Sprintf(`sessions_spawn does not support "%s". Use "message" or "sessions_send" for channel delivery.`, k))
		}
	}
	if sp.task, err = p.RequiredString("task"); err != nil {
		return sp, err
	}
	if sp.label, _, err = p.String("label"); err != nil {
		return sp, err
	}
	if n := utf8.RuneCountInString(sp.label); n > sendLabelMaxLength {
		return sp, badRequest(fmt.Sprintf("label must be at most %d characters (got %d)", sendLabelMaxLength, n))
	}
	rt, _, err := p.String("runtime")
	if err != nil {
		return sp, err
	}
	sp.runtime = runtimeSubagent // the reference: anything but "acp" is subagent
	if strings.EqualFold(rt, runtimeACP) {
		sp.runtime = runtimeACP
	}
	// validated later, in the reference's order (a returned error)
	if sp.agentID, sp.hasAgent, err = p.String("agentId"); err != nil {
		return sp, err
	}
	if sp.model, _, err = p.String("model"); err != nil {
		return sp, err
	}
	if sp.thinking, sp.hasThinking, err = p.String("thinking"); err != nil {
		return sp, err
	}
	if sp.cwd, _, err = p.String("cwd"); err != nil {
		return sp, err
	}
	rts, hasRT, err := seconds(p, "runTimeoutSeconds")
	if err != nil {
		return sp, err
	}
	legacy, hasLegacy, err := seconds(p, "timeoutSeconds")
	if err != nil {
		return sp, err
	}
	switch {
	case hasRT && hasLegacy && rts != legacy:
		return sp, badRequest(fmt.Sprintf("runTimeoutSeconds (%d) and timeoutSeconds (%d), its legacy alias, disagree; pass only runTimeoutSeconds", rts, legacy))
	case hasRT:
		sp.runTimeout, sp.hasTimeout = rts, true
	case hasLegacy:
		sp.runTimeout, sp.hasTimeout = legacy, true
	}
	if sp.thread, _, err = p.Bool("thread"); err != nil {
		return sp, err
	}
	if sp.mode, sp.hasMode, err = enumParam(p, "mode", "", spawnModeRun, spawnModeSession); err != nil {
		return sp, err
	}
	if sp.cleanup, sp.hasCleanup, err = enumParam(p, "cleanup", cleanupKeep, cleanupDelete, cleanupKeep); err != nil {
		return sp, err
	}
	if sp.sandbox, _, err = enumParam(p, "sandbox", sandboxInherit, sandboxInherit, sandboxRequire); err != nil {
		return sp, err
	}
	if sp.context, sp.hasContext, err = enumParam(p, "context", "", contextFork, contextIsolated); err != nil {
		return sp, err
	}
	if sp.streamTo, _, err = enumParam(p, "streamTo", "", "parent"); err != nil {
		return sp, err
	}
	if sp.resumeSessionID, _, err = p.String("resumeSessionId"); err != nil {
		return sp, err
	}
	if sp.lightContext, _, err = p.Bool("lightContext"); err != nil {
		return sp, err
	}
	if sp.attachments, sp.hasAttachments, err = readAttachments(p); err != nil {
		return sp, err
	}
	if sp.mountPath, err = readMountPath(p); err != nil {
		return sp, err
	}
	if sp.idempotencyKey, err = readIdempotencyKey(p); err != nil {
		return sp, err
	}
	return sp, nil
}

const attachmentsShape = "attachments must be an array of {name, content, encoding?: \"utf8\"|\"base64\", mimeType?} objects"

// readAttachments checks the attachments' shape (thrown); their content
// (names, base64, sizes) is checked by checkAttachments (returned), before
// anything is written.
func readAttachments(p rules.Params) ([]spawnAttachment, bool, error) {
	raw, ok := p.Raw("attachments")
	if !ok {
		return nil, false, nil
	}
	items, isArray := raw.([]any)
	if !isArray {
		return nil, false, badRequest(attachmentsShape)
	}
	out := make([]spawnAttachment, 0, len(items))
	for i, it := range items {
		m, isObj := it.(map[string]any)
		if !isObj {
			return nil, false, badRequest(fmt.Sprintf("%s; item %d is not an object", attachmentsShape, i))
		}
		ap := rules.Params(m)
		var a spawnAttachment
		var err error
		field := func(name string) string { return fmt.Sprintf("attachments[%d].%s", i, name) }
		for _, f := range []struct {
			name string
			dst  *string
		}{{"name", &a.name}, {"mimeType", &a.mimeType}} {
			if *f.dst, _, err = ap.String(f.name); err != nil {
				return nil, false, badRequest(field(f.name) + " must be a string")
			}
		}
		c, hasC := m["content"]
		if s, isStr := c.(string); hasC && isStr {
			a.content = s // untrimmed: content is data
		} else {
			return nil, false, badRequest(field("content") + " must be a string (the file's text, or its bytes in base64)")
		}
		if a.encoding, _, err = enumParam(ap, "encoding", "utf8", "utf8", "base64"); err != nil {
			return nil, false, badRequest(field("encoding") + ` must be "utf8" or "base64"`)
		}
		out = append(out, a)
	}
	return out, len(out) > 0, nil
}

// readMountPath reads attachAs.mountPath, the directory the attachments are
// named under (a relative path without "..").
func readMountPath(p rules.Params) (string, error) {
	raw, ok := p.Raw("attachAs")
	if !ok {
		return "", nil
	}
	m, isObj := raw.(map[string]any)
	if !isObj {
		return "", badRequest("attachAs must be an object such as {\"mountPath\": \"inputs\"}")
	}
	mp, _, err := rules.Params(m).String("mountPath")
	if err != nil {
		return "", badRequest("attachAs.mountPath must be a string")
	}
	if mp == "" {
		return "", nil
	}
	clean := path.Clean(mp)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(clean, 0) {
		return "", badRequest(fmt.Sprintf("attachAs.mountPath %s must be a relative path inside the child's workspace (no leading / and no ..)", strconv.Quote(mp)))
	}
	return clean, nil
}

// checkAttachments validates names and content and fills sizes and
// digests; a problem is a returned error, and nothing has been written.
func checkAttachments(as []spawnAttachment) (int, string) {
	if len(as) > maxSpawnAttachments {
		return 0, fmt.Sprintf("attachments: at most %d files per spawn (got %d)", maxSpawnAttachments, len(as))
	}
	seen := map[string]bool{}
	total := 0
	for i := range as {
		a := &as[i]
		if msg := attachmentNameProblem(a.name); msg != "" {
			return 0, fmt.Sprintf("attachments[%d].name %s", i, msg)
		}
		if seen[a.name] {
			return 0, fmt.Sprintf("attachments[%d].name %s is used twice; file names must be unique", i, strconv.Quote(a.name))
		}
		seen[a.name] = true
		data := []byte(a.content)
		if a.encoding == "base64" {
			var err error
			if data, err = decodeBase64(a.content); err != nil {
				return 0, fmt.Sprintf("attachments[%d] (%s): content is not valid base64 (%v); send standard base64, or encoding \"utf8\" for text", i, a.name, err)
			}
		}
		if len(data) > maxAttachmentFileBytes {
			return 0, fmt.Sprintf("attachments[%d] (%s) is %d bytes; one file may be at most %d bytes", i, a.name, len(data), maxAttachmentFileBytes)
		}
		total += len(data)
		if total > maxAttachmentTotalBytes {
			return 0, fmt.Sprintf("attachments total more than %d bytes (%d after attachments[%d]); send fewer or smaller files", maxAttachmentTotalBytes, total, i)
		}
		sum := sha256.Sum256(data)
		a.bytes, a.sha256 = len(data), hex.EncodeToString(sum[:])
	}
	return total, ""
}

func attachmentNameProblem(name string) string {
	switch {
	case name == "":
		return "is required (a file name such as \"notes.md\")"
	case len(name) > maxAttachmentNameBytes:
		return fmt.Sprintf("is longer than %d bytes", maxAttachmentNameBytes)
	case name == "." || name == "..", strings.ContainsAny(name, "/\\\x00"):
		return fmt.Sprintf("%s must be a plain file name (no /, \\ or NUL, not . or ..)", strconv.Quote(name))
	}
	return ""
}

// decodeBase64 is strict standard base64 (padding optional), ignoring
// line breaks and spaces, which encoders commonly insert.
func decodeBase64(s string) ([]byte, error) {
	t := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	enc := base64.StdEncoding
	if len(t)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	return enc.Strict().DecodeString(t)
}

func normalizeThinking(s string) (string, bool) {
	v := strings.ToLower(strings.TrimSpace(s))
	return v, slices.Contains(ThinkingLevels, v)
}

func sessionsSpawn(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	sp, err := readSpawnParams(p)
	if err != nil {
		return nil, err
	}
	acp := sp.runtime == runtimeACP
	// §5.1 step 2: runtime-specific parameters.
	if !acp {
		if sp.streamTo != "" {
			return spawnFail("error", "streamTo is only supported for runtime=acp; got runtime="+sp.runtime), nil
		}
		if sp.resumeSessionID != "" {
			return spawnFail("error", "resumeSessionId is only supported for runtime=acp; got runtime="+sp.runtime), nil
		}
		if sp.cwd != "" {
			return spawnFail("error", "cwd is only supported for runtime=acp; got runtime="+sp.runtime), nil
		}
	} else {
		if sp.lightContext {
			return nil, badRequest(errSpawnLightContextACP)
		}
		if sp.context == contextFork {
			return nil, badRequest(errSpawnForkACP)
		}
		if sp.hasAttachments {
			return spawnFail("error", "attachments are not supported for runtime=acp; use runtime=subagent or omit attachments"), nil
		}
	}
	// step 3: an explicit agent id is checked, never repaired.
	requesterAgent := requesterAgentID(r)
	target := requesterAgent
	if sp.hasAgent {
		if !rules.ValidAgentID(sp.agentID) {
			return spawnFail("error", fmt.Sprintf("Invalid agentId %q. Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. Use agents_list to discover valid targets.", sp.agentID)), nil
		}
		target = strings.ToLower(sp.agentID)
	}
	// step 4: mode.
	mode := sp.mode
	if !sp.hasMode {
		mode = spawnModeRun
		if sp.thread {
			mode = spawnModeSession
		}
	}
	if mode == spawnModeSession && !sp.thread {
		return spawnFail("error", errSpawnSessionNoThread), nil
	}
	reqSettings := d.Config.SubagentsFor(requesterAgent)
	// step 5: depth.
	callerDepth := d.spawnDepthOf(r.key)
	maxDepth := reqSettings.MaxSpawnDepth
	if callerDepth >= maxDepth {
		return spawnFail(rules.StatusForbidden, fmt.Sprintf("sessions_spawn is not allowed at this depth (current depth: %d, max: %d)", callerDepth, maxDepth)), nil
	}
	// step 6: fan-out, active children only.
	if n, limit := d.Children.ActiveChildren(r.key), reqSettings.MaxChildrenPerAgent; n >= limit {
		return spawnFail(rules.StatusForbidden, fmt.Sprintf("sessions_spawn has reached max active children for this session (%d/%d)", n, limit)), nil
	}
	// step 7: requireAgentId.
	if reqSettings.RequireAgentID != nil && *reqSettings.RequireAgentID && !sp.hasAgent {
		return spawnFail(rules.StatusForbidden, errSpawnRequireAgentID), nil
	}
	// step 8: allowlist, for another agent only.
	if target != requesterAgent {
		if msg := spawnAllowlistDenial(reqSettings.AllowAgents, target); msg != "" {
			return spawnFail(rules.StatusForbidden, msg), nil
		}
	}
	// step 9: sandbox.
	childSandboxed := sandboxedSession(d.Config, target, false)
	requesterSandboxed := r.sandboxed || sandboxedSession(d.Config, requesterAgent, r.key == r.alias.MainSessionKey(requesterAgent))
	if requesterSandboxed && !childSandboxed {
		return spawnFail(rules.StatusForbidden, errSpawnSandboxInherit), nil
	}
	if sp.sandbox == sandboxRequire && !childSandboxed {
		return spawnFail(rules.StatusForbidden, errSpawnSandboxRequire), nil
	}
	// step 10: model and thinking plan.
	reqEntry := d.Index.Get(r.key)
	tgtSettings := d.Config.SubagentsFor(target)
	model := rules.FirstNonEmpty(sp.model, tgtSettings.Model)
	thinkingRaw := rules.FirstNonEmpty(sp.thinking, tgtSettings.Thinking)
	if reqEntry != nil {
		model = rules.FirstNonEmpty(model, reqEntry.Rares().ModelOverride, reqEntry.Model)
		thinkingRaw = rules.FirstNonEmpty(thinkingRaw, reqEntry.Rares().ThinkingLevel)
	}
	thinking := ""
	if thinkingRaw != "" {
		var ok bool
		if thinking, ok = normalizeThinking(thinkingRaw); !ok {
			return spawnFail("error", fmt.Sprintf("Invalid thinking level %q. Use one of: %s.", thinkingRaw, strings.Join(ThinkingLevels, ", "))), nil
		}
	}
	// Our own checks, still before anything is written.
	spawnContext := sp.context
	if !sp.hasContext {
		spawnContext = contextIsolated
		if sp.thread {
			spawnContext = contextFork // threadBindings.defaultSpawnContext's default
		}
	}
	if spawnContext == contextFork && acp {
		spawnContext = contextIsolated // a thread-bound acp spawn: fork was only the default
	}
	if spawnContext == contextFork && target != requesterAgent {
		return spawnFail("error", fmt.Sprintf(`context="fork" needs the requester's own agent (%s); got agentId=%s. Use context="isolated" to spawn another agent.`, requesterAgent, target)), nil
	}
	if acp {
		if a := d.Config.Agent(target); a == nil || !strings.EqualFold(strings.TrimSpace(a.Runtime), "exec") {
			return spawnFail("error", fmt.Sprintf("runtime=acp runs an external harness: agent %s needs runtime: exec in agents.list (with exec.command naming the harness)", target)), nil
		}
	}
	var origin *subagents.Origin
	if reqEntry != nil {
		origin = routeOf(reqEntry)
	}
	if sp.thread && origin == nil {
		return spawnFail("error", "thread=true binds the child to the requester's channel thread, but this session has no channel route (no deliveryContext or lastChannel); spawn without thread=true"), nil
	}
	totalBytes, msg := checkAttachments(sp.attachments)
	if msg != "" {
		return spawnFail("error", msg), nil
	}
	cleanup := sp.cleanup
	if mode == spawnModeSession {
		cleanup = cleanupKeep
	}

	// Ids: random, or derived from (caller, idempotencyKey) so a retry
	// computes the same ones.
	childUUID, runID, sessionID := sessions.NewID(), sessions.NewID(), sessions.NewID()
	if sp.idempotencyKey != "" {
		childUUID = bus.DerivedUUID("sessionbus/sessions_spawn/child", r.key, sp.idempotencyKey)
		runID = bus.DerivedUUID("sessionbus/sessions_spawn/run", r.key, sp.idempotencyKey)
		sessionID = bus.DerivedUUID("sessionbus/sessions_spawn/session", r.key, sp.idempotencyKey)
	}
	kindSeg := "subagent"
	if acp {
		kindSeg = "acp"
	}
	childKey := "agent:" + target + ":" + kindSeg + ":" + childUUID
	childDepth := callerDepth + 1
	role := rules.RoleForDepth(childDepth, maxDepth)
	var attach *spawnAttachSummary
	if sp.hasAttachments {
		relDir := rules.FirstNonEmpty(sp.mountPath, fmt.Sprintf(spawnAttachmentsDirFmt, childUUID))
		attach = &spawnAttachSummary{Count: len(sp.attachments), TotalBytes: totalBytes, RelDir: relDir, Files: make([]spawnAttachFile, len(sp.attachments))}
		for i, a := range sp.attachments {
			attach.Files[i] = spawnAttachFile{Name: a.name, Bytes: a.bytes, SHA256: a.sha256}
		}
	}
	accepted := func(rec *subagents.Record) *spawnResult {
		res := &spawnResult{Status: "accepted", ChildSessionKey: rec.ChildSessionKey, RunID: rec.RunID, Mode: rec.SpawnMode, Attachments: attach}
		switch {
		case rec.SpawnMode == spawnModeSession:
			res.Note = spawnSessionModeNote
		case !rules.IsCronKey(rec.RequesterSessionKey):
			res.Note = SubagentSpawnAcceptedNote
		}
		if rec.Model != "" {
			applied := true
			res.ModelApplied = &applied
		}
		return res
	}
	if sp.idempotencyKey != "" {
		// a retry: the first call's record is the answer; nothing is written
		if first, _, err := d.Subagents.Get(ctx, childKey); err == nil {
			return idempotentSpawn(first, sp.idempotencyKey, accepted)
		} else if !errors.Is(err, subagents.ErrNotFound) {
			return spawnFail("error", "sessions_spawn: read the child registry: "+err.Error()), nil
		}
	}

	now := d.Now().UnixMilli()
	message := spawnMessage(childDepth, maxDepth, mode, sp.task)
	req := &runqueue.Request{
		RunID:             runID,
		SessionKey:        childKey,
		AgentID:           target,
		Message:           message,
		Prompt:            message,
		ExtraSystemPrompt: spawnSystemPrompt(r, childKey, sp, role, childDepth, maxDepth),
		Provenance:        &runqueue.Provenance{Kind: provenanceInterSession, SourceSessionKey: r.key, SourceChannel: d.requesterChannel(r), SourceTool: spawnToolName},
		Lane:              spawnLane,
		TimeoutSeconds:    0,
		ChainID:           runID,
		CreatedAt:         now,
		Recorded:          true,
	}
	runTimeout := reqSettings.RunTimeoutSeconds
	if sp.hasTimeout {
		runTimeout = sp.runTimeout
	}
	req.TimeoutSeconds = runTimeout
	rec := &subagents.Record{
		RunID: runID, ChildSessionKey: childKey, ChildSessionID: sessionID, ChildAgentID: target,
		ControllerSessionKey: r.key, RequesterSessionKey: r.key, RequesterDisplayKey: r.alias.Display(r.key),
		RequesterOrigin: origin, Task: sp.task, Label: sp.label, Cleanup: cleanup, SpawnMode: mode,
		Runtime: sp.runtime, Model: model, Thinking: thinking, Depth: childDepth, RunTimeoutSeconds: runTimeout,
		IdempotencyKey: sp.idempotencyKey, ExpectsCompletion: true, CreatedAt: now, Request: req,
		SubagentRole: role, SubagentControlScope: rules.ControlScopeFor(role), SpawnContext: spawnContext, Thread: sp.thread,
	}

	hook := func(step string) error {
		if d.SpawnHook == nil {
			return nil
		}
		return d.SpawnHook(step)
	}
	// Wave 0 (fork or attachments only): the child's transcript before its
	// first message, one atomic batch, before the commit point.
	if spawnContext == contextFork || sp.hasAttachments {
		if err := hook(SpawnStepTranscript); err != nil {
			return nil, err
		}
		if err := d.seedChildTranscript(ctx, r.key, childKey, spawnContext == contextFork, sp.attachments, attach, sp.idempotencyKey != ""); err != nil {
			return spawnFail("error", "sessions_spawn: write the child's transcript: "+err.Error()), nil
		}
	}
	// One wave: the registry record (the commit point), the child's entry,
	// the pending run record and the run request, sent back to back on
	// this worker's connection, then every acknowledgement awaited. The
	// server reads a connection in order, so a crash of this process drops
	// a suffix of the four: whatever landed is a prefix that starts with
	// the registry record, which subagents.Complete finishes. A rejected
	// registry write is handled below (spawnRejected).
	w, hookErr := d.sendSpawn(rec, hook)
	if w.reg == nil {
		if hookErr != nil {
			return nil, hookErr
		}
		return spawnFail("error", "Failed to register subagent run: "+w.regErr.Error()), nil
	}
	w.wait(ctx)
	if w.regErr != nil {
		if hookErr != nil {
			return nil, hookErr
		}
		return d.spawnRejected(ctx, rec, w, accepted)
	}
	d.Children.Note(rec, w.regRev) // this worker's next fan-out check counts the child
	if hookErr != nil {
		return nil, hookErr
	}
	if err := errors.Join(w.entryErr, w.runRecErr, w.pubErr); err != nil {
		// Registered, so it will run: complete it now, or leave it to the
		// sweep, which does the same.
		if cerr := spawns.Complete(ctx, d.Subagents, d.Store, d.Runs, d.Queue, rec); cerr != nil {
			d.Log.Warn("sessions_spawn: spawn registered but not queued; a gateway sweep completes it", "child", childKey, "err", errors.Join(err, cerr))
			return &spawnResult{Status: "error", ChildSessionKey: childKey, RunID: runID, Error: fmt.Sprintf(
				"the child is registered but its run is not queued yet (%v); a gateway queues it shortly. Do not spawn it again: check with subagents list", errors.Join(err, cerr))}, nil
		}
	}
	return d.spawnReply(accepted(rec)), nil
}

// spawnReply encodes an accepted spawn's result when redactResult would
// mask nothing in it, checking its strings the way redactResult does but
// its constant note only once per redactor: the note is most of the
// reply's text, and scanning it took most of redactResult's time on every
// spawn. Redaction masks within one string, so strings are checked apart
// from the note (each on a line of its own, as redactResult joins them).
// With attachments, or anything that may mask, the result goes to
// redactResult whole.
func (d *Deps) spawnReply(res *spawnResult) any {
	if res.Attachments != nil || res.Error != "" || d.mayMaskConst(res.Note) ||
		d.Redactor.MayMask(res.Status+"\n"+res.ChildSessionKey+"\n"+res.RunID+"\n"+res.Mode) {
		return res
	}
	b, err := json.Marshal(res)
	if err != nil {
		return res
	}
	return checkedResult(b)
}

// spawnWave is the one write wave of a spawn: the futures of its four
// writes, in the order they were sent, and their outcomes once awaited.
type spawnWave struct {
	reg, entry, runRec, pub             jetstream.PubAckFuture
	regRev, entryRev                    uint64
	regErr, entryErr, runRecErr, pubErr error
}

// sendSpawn puts the spawn's four writes on the connection, registry
// record first, without waiting for any acknowledgement. A hook error at
// the registry step stops everything (a crash before the commit point);
// at a later step it drops that write only and is returned: the state a
// lost or refused write leaves, which subagents.Complete must finish.
func (d *Deps) sendSpawn(rec *subagents.Record, hook func(string) error) (*spawnWave, error) {
	w := &spawnWave{}
	if err := hook(SpawnStepRegistry); err != nil {
		w.regErr = err
		return w, err
	}
	if w.reg, w.regErr = d.Subagents.CreateAsync(rec); w.regErr != nil {
		return w, nil // nothing sent
	}
	var crashed error
	send := func(step string, write func() (jetstream.PubAckFuture, error)) (jetstream.PubAckFuture, error) {
		if err := hook(step); err != nil {
			crashed = errors.Join(crashed, err)
			return nil, nil
		}
		return write()
	}
	w.entry, w.entryErr = send(SpawnStepEntry, func() (jetstream.PubAckFuture, error) {
		return d.Store.CreateAsync(spawns.ChildEntry(rec))
	})
	w.runRec, w.runRecErr = send(SpawnStepRunRecord, func() (jetstream.PubAckFuture, error) {
		return d.Runs.CreateAsync(spawns.RunRecord(rec))
	})
	w.pub, w.pubErr = send(SpawnStepPublish, func() (jetstream.PubAckFuture, error) {
		return d.Queue.PublishAsync(rec.Request)
	})
	return w, crashed
}

// wait collects the acknowledgements. An entry that exists already is no
// error (a retry's, identical); a run record that exists is (Complete then
// decides whether its run was queued).
func (w *spawnWave) wait(ctx context.Context) {
	ack := func(f jetstream.PubAckFuture, rev *uint64, err *error) {
		if f == nil || *err != nil {
			return
		}
		select {
		case a := <-f.Ok():
			if rev != nil {
				*rev = a.Sequence
			}
		case *err = <-f.Err():
		case <-ctx.Done():
			*err = ctx.Err()
		}
	}
	ack(w.reg, &w.regRev, &w.regErr)
	ack(w.entry, &w.entryRev, &w.entryErr)
	ack(w.runRec, nil, &w.runRecErr)
	ack(w.pub, nil, &w.pubErr)
	if bus.IsWrongLastSeq(w.entryErr) {
		w.entryErr = nil
		w.entry = nil // not this call's entry
	}
}

// spawnRejected answers a spawn whose registry record the server refused,
// after its other writes were already sent behind it. If the record is
// there with this spawn's run id, a concurrent retry with the same
// idempotencyKey committed first: this call's writes were repeats of its
// own (same ids: the creates were refused, the run request's message id
// was dropped by SB_RUNS's dedupe) and its answer is the first call's.
// Otherwise nothing committed, and what landed behind the refused record
// is undone: the run is ended before any gateway runs it (its record made
// terminal; a gateway that took it already finds no registry record and
// refuses it, see gateway.startChild) and the entry this call created is
// deleted, so no run goes ahead without a child record.
//
// A failure that is no refusal by the server (the connection dropped with
// the acknowledgement pending, as when a cluster node dies) leaves the
// outcome unknown: the record is read back, and if it landed the spawn
// committed and is finished like one whose later writes were lost.
func (d *Deps) spawnRejected(ctx context.Context, rec *subagents.Record, w *spawnWave, accepted func(*subagents.Record) *spawnResult) (any, error) {
	if bus.IsWrongLastSeq(w.regErr) {
		first, _, err := d.Subagents.Get(ctx, rec.ChildSessionKey)
		if err == nil && first.RunID == rec.RunID {
			return idempotentSpawn(first, rec.IdempotencyKey, accepted)
		}
	} else if !serverRefused(w.regErr) {
		first, rev, err := d.readBackRegistration(ctx, rec.ChildSessionKey)
		switch {
		case err == nil && first.RunID == rec.RunID && first.IdempotencyKey == rec.IdempotencyKey:
			if cerr := spawns.Complete(ctx, d.Subagents, d.Store, d.Runs, d.Queue, rec); cerr != nil {
				d.Log.Warn("sessions_spawn: spawn registered but not queued; a gateway sweep completes it", "child", rec.ChildSessionKey, "err", cerr)
			}
			d.Children.Note(first, rev)
			return accepted(first), nil
		case err != nil && !errors.Is(err, subagents.ErrNotFound):
			// still unknown: undoing could break a committed spawn, and a
			// run without its registry record is refused by the gateways
			return spawnFail("error", "Failed to register subagent run: "+w.regErr.Error()), nil
		}
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	reason := "the spawn that queued this run was never registered: " + w.regErr.Error()
	ended := spawns.RunRecord(rec)
	ended.Status, ended.Error, ended.EndedAt = runs.Error, reason, d.Now().UnixMilli()
	err := d.Runs.Create(uctx, ended)
	if errors.Is(err, runs.ErrExists) {
		_, err = d.Runs.Update(uctx, rec.RunID, func(r *runs.Record) error {
			if r.Status != runs.Pending {
				return record.ErrUnchanged
			}
			r.Status, r.Error, r.EndedAt = ended.Status, ended.Error, ended.EndedAt
			return nil
		})
	}
	if w.entry != nil && w.entryErr == nil {
		err = errors.Join(err, d.Store.KV().Delete(uctx, bus.EncodeKey(rec.ChildSessionKey), jetstream.LastRevision(w.entryRev)))
	}
	if err != nil {
		d.Log.Warn("sessions_spawn: undo a spawn whose registration failed (a gateway refuses its run)", "child", rec.ChildSessionKey, "run", rec.RunID, "err", err)
	}
	return spawnFail("error", "Failed to register subagent run: "+w.regErr.Error()), nil
}

// serverRefused reports an error the server answered (an API error), as
// opposed to one that leaves a write's outcome unknown.
func serverRefused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr)
}

// readBackRegistration reads a child's registry record after a write whose
// acknowledgement was lost, retrying for a few seconds while the
// connection reconnects.
func (d *Deps) readBackRegistration(ctx context.Context, childKey string) (*subagents.Record, uint64, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rec, rev, err := d.Subagents.Get(rctx, childKey)
		cancel()
		if err == nil || errors.Is(err, subagents.ErrNotFound) || ctx.Err() != nil || time.Now().After(deadline) {
			return rec, rev, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// idempotentSpawn answers a retried spawn with the first call's ids.
func idempotentSpawn(first *subagents.Record, key string, accepted func(*subagents.Record) *spawnResult) (any, error) {
	if first.IdempotencyKey != key {
		return spawnFail("error", "sessions_spawn: idempotencyKey collides with another child; use another key"), nil
	}
	return accepted(first), nil
}

// spawnAllowlistDenial is §5.1 step 8: "" when allowed.
func spawnAllowlistDenial(allow []string, target string) string {
	var ids []string
	for _, a := range allow {
		t := strings.TrimSpace(a)
		if t == "*" {
			return ""
		}
		if t == "" {
			continue
		}
		if id := rules.NormalizeAgentID(t); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if slices.Contains(ids, target) {
		return ""
	}
	list := "none"
	if len(ids) > 0 {
		list = strings.Join(ids, ", ")
	}
	return fmt.Sprintf("agentId is not allowed for sessions_spawn (allowed: %s)", list)
}

// sandboxedSession reports whether a session of agentID runs sandboxed:
// agents.*.sandbox.mode all, or non-main for any session but the agent's
// main one.
func sandboxedSession(cfg *config.Config, agentID string, isMain bool) bool {
	switch cfg.SandboxModeFor(agentID) {
	case config.SandboxAll:
		return true
	case config.SandboxNonMain:
		return !isMain
	}
	return false
}

// spawnDepthOf is the caller's depth (§5.3): its entry's spawnDepth, else
// one more than its spawner's depth (cycle-safe), else the number of
// `:subagent:` segments in its key. Bare keys are also tried under the
// default agent.
func (d *Deps) spawnDepthOf(key string) int {
	seen := map[string]bool{}
	var depth func(k string) (int, bool)
	depth = func(k string) (int, bool) {
		if seen[k] {
			return 0, false
		}
		seen[k] = true
		e := d.Index.Get(k)
		if e == nil && !strings.HasPrefix(strings.ToLower(k), "agent:") {
			e = d.Index.Get("agent:" + rules.DefaultAgentID + ":" + k)
		}
		if e != nil && e.SpawnDepth != nil && *e.SpawnDepth >= 0 {
			return *e.SpawnDepth, true
		}
		if e != nil && e.SpawnedBy != "" {
			if pd, ok := depth(e.SpawnedBy); ok {
				return pd + 1, true
			}
		}
		return rules.SubagentDepthFromKey(k), true
	}
	n, _ := depth(key)
	return n
}

// routeOf is a session's channel route, nil when it has none.
func routeOf(e *sessions.Entry) *subagents.Origin {
	o := &subagents.Origin{Channel: e.LastChannel, To: e.LastTo, AccountID: e.LastAccountID, ThreadID: e.LastThreadID}
	if dc := e.DeliveryContext; dc != nil && dc.Channel != "" {
		o = &subagents.Origin{Channel: dc.Channel, To: dc.To, AccountID: dc.AccountID, ThreadID: dc.ThreadID}
	}
	if o.Channel == "" {
		return nil
	}
	return o
}

// spawnMessage is the child's first message (§5.2 step 5), paragraphs
// separated by blank lines.
func spawnMessage(depth, maxDepth int, mode, task string) string {
	parts := []string{fmt.Sprintf(spawnContextLine, depth, maxDepth)}
	if mode == spawnModeSession {
		parts = append(parts, spawnPersistentLine)
	}
	parts = append(parts, spawnTaskPrefix+task)
	return strings.Join(parts, "\n\n")
}

// spawnSystemPrompt is the child's extra system prompt: its role and the
// rules of a sub-agent; the task itself is in the first message. With
// lightContext it is the role line alone. An acp child's harness also
// finds its resumeSessionId, streamTo and cwd here.
func spawnSystemPrompt(r *requester, childKey string, sp spawnParams, role string, depth, maxDepth int) string {
	lines := []string{fmt.Sprintf("# Subagent Context\nYou are a %s subagent (depth %d/%d) spawned by %s.", role, depth, maxDepth, r.alias.Display(r.key))}
	if !sp.lightContext {
		lines = append(lines,
			"- Do the task in the [Subagent Task] message; your final reply is announced to your requester automatically.",
			"- Do not busy-poll for status and do not message users directly.",
		)
		if role == rules.RoleOrchestrator {
			lines = append(lines, "- You may spawn your own subagents with sessions_spawn; their results arrive as messages. Use sessions_yield to wait for them.")
		} else {
			lines = append(lines, "- You cannot spawn further subagents.")
		}
		lines = append(lines, "Requester session: "+r.key, "Your session: "+childKey)
		if sp.label != "" {
			lines = append(lines, "Label: "+sp.label)
		}
	}
	if sp.runtime == runtimeACP {
		for _, kv := range [][2]string{{"resumeSessionId", sp.resumeSessionID}, {"streamTo", sp.streamTo}, {"cwd", sp.cwd}} {
			if kv[1] != "" {
				lines = append(lines, "ACP "+kv[0]+": "+kv[1])
			}
		}
	}
	return strings.Join(lines, "\n")
}

// seedChildTranscript writes what precedes the child's first message: with
// fork, a copy of the requester's transcript (its newest entries that fit
// one atomic batch along with the attachments); then one entry per
// attachment. One Append, so all of it is stored or none. A retry (known)
// finds a transcript already seeded by a first call that stopped before
// its commit point and keeps it.
func (d *Deps) seedChildTranscript(ctx context.Context, requesterKey, childKey string, fork bool, as []spawnAttachment, sum *spawnAttachSummary, retry bool) error {
	enc := bus.EncodeKey(childKey)
	if retry {
		n, err := d.Transcripts.Count(ctx, enc)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	var entries [][]byte
	if fork {
		room := transcripts.MaxBatch - len(as)
		src, _, err := d.Transcripts.Tail(ctx, bus.EncodeKey(requesterKey), room, 0)
		if err != nil {
			return fmt.Errorf("read the requester's transcript: %w", err)
		}
		for _, e := range src {
			m, ok := decodeMessage(e.Data)
			if !ok {
				continue
			}
			delete(m, runMarker) // the requester's run bookkeeping is not the child's
			data, err := bus.Marshal(m)
			if err != nil {
				return err
			}
			entries = append(entries, data)
		}
	}
	for _, a := range as {
		mime := ""
		if a.mimeType != "" {
			mime = ", " + a.mimeType
		}
		p := path.Join(sum.RelDir, a.name)
		head := fmt.Sprintf(spawnAttachmentEntryHead, p, a.bytes, a.sha256, mime, a.encoding)
		data, err := bus.Marshal(map[string]any{
			"role":    "user",
			"content": head + "\n\n" + a.content,
			"attachment": map[string]any{
				"name": a.name, "path": p, "bytes": a.bytes, "sha256": a.sha256,
				"mimeType": a.mimeType, "encoding": a.encoding,
			},
		})
		if err != nil {
			return err
		}
		entries = append(entries, data)
	}
	if len(entries) == 0 {
		return nil
	}
	_, err := d.Transcripts.Append(ctx, enc, entries...)
	return err
}
