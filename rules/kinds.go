package rules

import "strings"

// Gateway classifications (OpenClaw's `classification` row field). The taxonomy
// is an open string upstream; these are the values Classify produces.
const (
	ClassGlobal    = "global"
	ClassUnknown   = "unknown"
	ClassMain      = "main"
	ClassCron      = "cron"
	ClassHook      = "hook"
	ClassNode      = "node"
	ClassSubagent  = "subagent"
	ClassAcp       = "acp"
	ClassDashboard = "dashboard"
	ClassThread    = "thread"
	ClassChannel   = "channel"
	ClassGroup     = "group"
	ClassDirect    = "direct"
	ClassCustom    = "custom"
)

// Tool-level kinds: the only kind values the model ever sees.
const (
	KindMain  = "main"
	KindGroup = "group"
	KindCron  = "cron"
	KindHook  = "hook"
	KindNode  = "node"
	KindOther = "other"
)

// IsToolKind reports a value sessions_list accepts in its kinds filter
// (others are dropped silently there).
func IsToolKind(k string) bool {
	switch k {
	case KindMain, KindGroup, KindCron, KindHook, KindNode, KindOther:
		return true
	}
	return false
}

// Classify computes the Gateway classification of a store key. Upstream's
// producer was not found; this is a faithful reconstruction of its values,
// and the order of checks is significant (a cron key with a thread suffix is
// still cron). Legacy bare keys are classified by the whole key, so "cron:x"
// is cron here although IsCronKey("cron:x") is false. An empty key is
// unknown; a malformed agent key ("agent::broken") matches nothing and is
// custom. chatType is the row's stored chat type, if any; it outranks what
// the key implies.
func Classify(key string, a Alias, chatType string) string {
	a = a.norm()
	raw := lowerTrim(key)
	switch raw {
	case "", KeyUnknown:
		return ClassUnknown
	case KeyGlobal:
		return ClassGlobal
	}
	rest := restOrRaw(raw)
	switch {
	case rest == a.MainKey:
		return ClassMain
	case strings.HasPrefix(rest, "cron:"):
		return ClassCron
	case strings.HasPrefix(rest, "hook:"):
		return ClassHook
	case strings.HasPrefix(rest, "node-"), strings.HasPrefix(rest, "node:"):
		return ClassNode
	case strings.HasPrefix(rest, "subagent:"):
		return ClassSubagent
	case strings.HasPrefix(rest, "acp:"):
		return ClassAcp
	case strings.HasPrefix(rest, "dashboard:"):
		return ClassDashboard
	}
	if _, _, ok := ParseThreadSuffix(raw); ok {
		return ClassThread
	}
	if pk := peerKind(raw, chatType); pk != "" {
		return pk
	}
	return ClassCustom
}

// PeerKind is the conversation kind (group|channel|direct, or "" when the
// key names no conversation) of a key, looking through a thread suffix to
// its parent conversation. ToolKind needs it to place thread sessions.
func PeerKind(key, chatType string) string {
	base, _, _ := ParseThreadSuffix(trim(key))
	return peerKind(lowerTrim(base), chatType)
}

// peerKind applies the reconstruction's order: channel, then group, then
// direct. An explicit chatType wins over the shapes the key implies.
func peerKind(lowerKey, chatType string) string {
	ct := normalizeChatType(chatType)
	if ct == "" {
		ct = normalizeChatType(ChatTypeFromKey(lowerKey))
	}
	switch {
	case ct == ChatChannel || strings.Contains(lowerKey, ":channel:"):
		return ClassChannel
	case ct == ChatGroup || strings.Contains(lowerKey, ":group:"):
		return ClassGroup
	case ct == ChatDirect:
		return ClassDirect
	}
	return ""
}

// ToolKind projects a Gateway classification onto the tool-level kinds.
// global reads as main because under global scope it is the main session;
// thread sessions inherit group from a group or channel parent.
func ToolKind(classification, peerKind string) string {
	switch lowerTrim(classification) {
	case ClassMain, ClassGlobal:
		return KindMain
	case ClassGroup, ClassChannel:
		return KindGroup
	case ClassCron:
		return KindCron
	case ClassHook:
		return KindHook
	case ClassNode:
		return KindNode
	case ClassThread:
		if pk := lowerTrim(peerKind); pk == ChatGroup || pk == ChatChannel {
			return KindGroup
		}
	}
	return KindOther
}

// Kind is the tool-level kind of a store key: Classify, then ToolKind.
func Kind(key string, a Alias, chatType string) string {
	return ToolKind(Classify(key, a, chatType), PeerKind(key, chatType))
}

// Channel values DeriveChannel produces besides real channel names.
const (
	ChannelInternal = "internal"
	ChannelUnknown  = "unknown"
)

// DeriveChannel is the `channel` of a sessions_list row. Automation sessions
// (cron, hook, node) have no chat behind them and read as "internal".
// Otherwise the stored channel, the origin provider, then the last delivery
// channel (deliveryContext.channel ?? lastChannel, folded by the caller) are
// used as stored; a channel read from the key comes back lower-cased, as
// OpenClaw parses keys.
func DeriveChannel(kind, rowChannel, originProvider, lastChannel, key string) string {
	switch lowerTrim(kind) {
	case KindCron, KindHook, KindNode:
		return ChannelInternal
	}
	if ch := FirstNonEmpty(rowChannel, originProvider, lastChannel); ch != "" {
		return ch
	}
	if ch := channelFromKey(key); ch != "" {
		return ch
	}
	return ChannelUnknown
}
