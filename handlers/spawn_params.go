package handlers

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/rules"
)

// spawnParams are sessions_spawn's parameters as read, before any check
// that needs the requester or the config.
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

// spawnRejectedKeys are the channel-delivery keys sessions_spawn refuses
// (thrown), in OpenClaw's order.
var spawnRejectedKeys = []string{"target", "transport", "channel", "to", "threadId", "thread_id", "replyTo", "reply_to"}

// readSpawnParams reads and type-checks every parameter; a wrong type is
// thrown. It and the readers it calls are plain functions of the
// rules.Params, which lets TestSchemaParamsMatchHandlers follow them.
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
	sp.runtime = runtimeSubagent // as in OpenClaw: anything but "acp" is subagent
	if strings.EqualFold(rt, runtimeACP) {
		sp.runtime = runtimeACP
	}
	// validated later, in OpenClaw's order (a returned error)
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
	rts, hasRT, err := p.TimeoutSeconds("runTimeoutSeconds")
	if err != nil {
		return sp, err
	}
	legacy, hasLegacy, err := p.TimeoutSeconds("timeoutSeconds")
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
	if sp.mode, sp.hasMode, err = p.Enum("mode", "", spawnModeRun, spawnModeSession); err != nil {
		return sp, err
	}
	if sp.cleanup, sp.hasCleanup, err = p.Enum("cleanup", cleanupKeep, cleanupDelete, cleanupKeep); err != nil {
		return sp, err
	}
	if sp.sandbox, _, err = p.Enum("sandbox", sandboxInherit, sandboxInherit, sandboxRequire); err != nil {
		return sp, err
	}
	if sp.context, sp.hasContext, err = p.Enum("context", "", contextFork, contextIsolated); err != nil {
		return sp, err
	}
	if sp.streamTo, _, err = p.Enum("streamTo", "", "parent"); err != nil {
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
