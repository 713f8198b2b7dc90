// Package routing maps a message from a chat channel (its channel, account,
// sender, chat type, group and thread) to the session key OpenClaw gives it:
// session.dmScope, session.identityLinks, group and channel keys, thread
// suffixes, session.mainKey and the agent bindings. The ingress uses it when
// an adapter names where a message came from instead of a session key.
package routing

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/rules"
)

// The dmScope values (session.dmScope): how direct messages are grouped.
const (
	DMScopeMain                  = "main"
	DMScopePerPeer               = "per-peer"
	DMScopePerChannelPeer        = "per-channel-peer"
	DMScopePerAccountChannelPeer = "per-account-channel-peer"
)

// The chat types a message may name.
const (
	ChatDirect  = "direct"
	ChatGroup   = "group"
	ChatChannel = "channel"
)

// DefaultAccountID is the account of a message that names none, and the
// account segment of per-account-channel-peer keys for it.
const DefaultAccountID = "default"

// Message is where an inbound message came from.
type Message struct {
	Channel   string // normalized channel id (bus.NormalizeChannel)
	AccountID string // the channel account that received it; "" = default
	From      string // the sender's id on the channel
	ChatType  string // direct, group or channel; "" = group when GroupID is set, else direct
	GroupID   string // the group or channel id (chat type group or channel)
	ThreadID  string // the thread (or Telegram forum topic) inside the chat
	AgentID   string // an explicit agent; "" = the bindings decide
}

// Route is the session a message goes to and how it was chosen.
type Route struct {
	SessionKey string
	AgentID    string
	// MainSessionKey is the agent's main session (agent:<id>:<mainKey>).
	MainSessionKey string
	// BaseSessionKey is the key without its thread suffix (equal to
	// SessionKey when the message names no thread).
	BaseSessionKey string
	ChatType       string
	AccountID      string // normalized; DefaultAccountID when none was named
	// MatchedBy says which rule chose the agent, with OpenClaw's names:
	// explicit, binding.peer, binding.peer.wildcard, binding.account,
	// binding.channel or default.
	MatchedBy string
}

// Router resolves messages under one configuration. It is immutable and safe
// for concurrent use.
type Router struct {
	mainKey       string
	dmScope       string
	identityLinks map[string][]string
	bindings      []binding
	defaultAgent  string
	knownAgents   map[string]bool // agents.list ids; empty: any valid id
}

// New builds the router of a validated configuration.
func New(c *config.Config) *Router {
	r := &Router{
		mainKey:       normalizeMainKey(c.Session.MainKey),
		dmScope:       strings.ToLower(strings.TrimSpace(c.Session.DMScope)),
		identityLinks: c.Session.IdentityLinks,
		defaultAgent:  rules.DefaultAgentID,
		knownAgents:   map[string]bool{},
	}
	if r.dmScope == "" {
		r.dmScope = DMScopeMain
	}
	marked := false
	for i, a := range c.Agents.List {
		id := rules.NormalizeAgentID(a.ID)
		r.knownAgents[id] = true
		// OpenClaw's default agent: the first one marked default, else the
		// first listed, else main
		if (i == 0 && !marked) || (a.Default && !marked) {
			r.defaultAgent = id
			marked = a.Default
		}
	}
	for _, b := range c.Bindings {
		r.bindings = append(r.bindings, newBinding(b))
	}
	return r
}

// DMScope is the configured dmScope.
func (r *Router) DMScope() string { return r.dmScope }

// Resolve maps m to its session. Errors are *rules.InputError-like bad
// requests that say which field is wrong and what to send instead.
func (r *Router) Resolve(m Message) (Route, error) {
	m.From = strings.TrimSpace(m.From)
	m.GroupID = strings.TrimSpace(m.GroupID)
	m.ThreadID = strings.TrimSpace(m.ThreadID)
	if m.Channel == "" {
		return Route{}, inputErr("channel required: name the channel the message came from (e.g. telegram)")
	}
	if m.From == "" {
		return Route{}, inputErr("from required: name the sender's id on the channel")
	}
	chatType, err := normalizeChatType(m.ChatType, m.GroupID)
	if err != nil {
		return Route{}, err
	}
	if chatType != ChatDirect && m.GroupID == "" {
		return Route{}, inputErr(fmt.Sprintf("groupId required: a %s message names its %s id (the chat it was posted in)", chatType, chatType))
	}
	if chatType == ChatDirect && m.GroupID != "" {
		return Route{}, inputErr("groupId is set but chatType is direct: drop groupId, or send chatType group or channel")
	}
	if m.ThreadID != "" && threadless[m.Channel] {
		return Route{}, inputErr(fmt.Sprintf("threadId given, but channel %s has no threads (OpenClaw's %s chats are direct or group only): drop threadId", m.Channel, m.Channel))
	}
	route := Route{ChatType: chatType, AccountID: NormalizeAccountID(m.AccountID)}
	peerID := m.From
	if chatType != ChatDirect {
		peerID = m.GroupID
	}
	route.AgentID, route.MatchedBy, err = r.pickAgent(m, route.AccountID, chatType, peerID)
	if err != nil {
		return Route{}, err
	}
	route.MainSessionKey = "agent:" + route.AgentID + ":" + r.mainKey
	if route.BaseSessionKey, err = r.baseKey(route, m, peerID); err != nil {
		return Route{}, err
	}
	if err := checkKeyID("threadId", m.ThreadID); err != nil {
		return Route{}, err
	}
	route.SessionKey = threadKey(route.BaseSessionKey, m.Channel, chatType, m.ThreadID)
	if err := checkKey(route.SessionKey); err != nil {
		return Route{}, err
	}
	return route, nil
}

// baseKey is OpenClaw's buildAgentPeerSessionKey, refusing a group or
// sender id that checkKeyID refuses.
func (r *Router) baseKey(route Route, m Message, peerID string) (string, error) {
	prefix := "agent:" + route.AgentID + ":"
	if route.ChatType != ChatDirect {
		if err := checkKeyID("groupId", peerID); err != nil {
			return "", err
		}
		return prefix + m.Channel + ":" + route.ChatType + ":" + groupPeerID(m.Channel, route.ChatType, peerID), nil
	}
	if r.dmScope == DMScopeMain {
		return route.MainSessionKey, nil
	}
	peer := strings.ToLower(linkedPeer(r.identityLinks, m.Channel, peerID))
	if err := checkKeyID("from", peer); err != nil {
		return "", err
	}
	switch r.dmScope {
	case DMScopePerAccountChannelPeer:
		return prefix + m.Channel + ":" + route.AccountID + ":direct:" + peer, nil
	case DMScopePerChannelPeer:
		return prefix + m.Channel + ":direct:" + peer, nil
	default: // per-peer
		return prefix + "direct:" + peer, nil
	}
}

// keyMarkers are the words a routed key marks its parts with
// (<channel>:group:<id>, <channel>:<account>:direct:<peer>,
// <base>:thread:<id>, a Telegram group's :topic:<id>, the legacy dm).
var keyMarkers = []string{"thread", "topic", "direct", "dm", "group", "channel"}

// checkKeyID refuses a sender, group or thread id whose ":"-separated parts
// would read as the key's own: OpenClaw puts such ids in keys as sent (a
// Matrix room id is !room:server, an IPv6 server name holds "::"), neither
// escaping nor refusing a ":", and finds a key's thread at its last
// ":thread:". So a group "gx:thread:t1" got the key of thread t1 of group
// gx, a DM "p:thread:t" the key of p's thread t, a group "direct:p" under
// an account named group that of p's DM, and a ":group:" or ":topic:" part
// made a DM's key classify as a group's or a thread's. An id with such a
// part, or one starting or ending with ":" (a key part OpenClaw's own
// parser drops, so the key would read as the id without it), is refused
// rather than routed into a session that is not its own. An id without ":"
// is a single part of the key and always routes.
func checkKeyID(field, id string) error {
	if !strings.Contains(id, ":") {
		return nil
	}
	if strings.HasPrefix(id, ":") || strings.HasSuffix(id, ":") {
		return inputErr(fmt.Sprintf("%s %q cannot be part of a session key: it starts or ends with \":\", so the key would read as another id's; send the platform's id without the leading or trailing \":\"", field, id))
	}
	folded := ":" + strings.ToLower(id) + ":"
	for _, w := range keyMarkers {
		if strings.Contains(folded, ":"+w+":") {
			return inputErr(fmt.Sprintf("%s %q cannot be part of a session key: it has a %q part between colons, a word session keys mark their own parts with (:group:, :channel:, :direct:, :dm:, :thread:, :topic:), so the message would land in another session; a thread goes in threadId, and the group or sender id is the platform's id alone",
				field, id, w))
		}
	}
	return nil
}

// linkedPeer is OpenClaw's resolveLinkedDirectPeerId: the canonical name
// whose identityLinks list holds the peer, bare or as <channel>:<peer>
// (compared without case), else the peer itself. Canonical names are tried
// in sorted order so a peer listed under two names always gets the same one.
func linkedPeer(links map[string][]string, channel, peer string) string {
	if len(links) == 0 {
		return peer
	}
	bare := strings.ToLower(peer)
	scoped := strings.ToLower(channel + ":" + peer)
	for _, canonical := range sortedKeys(links) {
		name := strings.TrimSpace(canonical)
		if name == "" {
			continue
		}
		for _, id := range links[canonical] {
			if n := strings.ToLower(strings.TrimSpace(id)); n != "" && (n == bare || n == scoped) {
				return name
			}
		}
	}
	return peer
}

// casePreserving are the (channel, chat type) pairs whose ids OpenClaw keeps
// as sent: Signal group ids and Matrix room ids are case-sensitive (base64,
// opaque), so folding them would merge distinct chats.
var casePreserving = map[string]bool{
	"signal:group":   true,
	"matrix:group":   true,
	"matrix:channel": true,
}

func groupPeerID(channel, chatType, id string) string {
	if casePreserving[channel+":"+chatType] {
		return id
	}
	return strings.ToLower(id)
}

// threadless are the channels OpenClaw declares without threads (their
// chat types are direct and group only): a thread id there is a mistake of
// the adapter, not a chat.
var threadless = map[string]bool{"whatsapp": true, "signal": true, "imessage": true}

// Threadless reports a channel (normalized) without threads.
func Threadless(channel string) bool { return threadless[channel] }

// threadKey adds the thread to a base key as OpenClaw does: a Telegram
// forum topic is part of the group's key (:topic:<id>), every other thread
// is a :thread:<id> suffix, lower-cased except in Matrix, whose event ids
// are case-sensitive.
func threadKey(base, channel, chatType, threadID string) string {
	switch {
	case threadID == "":
		return base
	case channel == "telegram" && chatType != ChatDirect:
		return base + ":topic:" + threadID
	case channel == "matrix":
		return base + ":thread:" + threadID
	default:
		return base + ":thread:" + strings.ToLower(threadID)
	}
}

func normalizeChatType(t, groupID string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "":
		if groupID != "" {
			return ChatGroup, nil
		}
		return ChatDirect, nil
	case "direct", "dm":
		return ChatDirect, nil
	case "group":
		return ChatGroup, nil
	case "channel":
		return ChatChannel, nil
	}
	return "", inputErr(fmt.Sprintf("chatType %q is unknown: use direct, group or channel", t))
}

func normalizeMainKey(k string) string {
	if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
		return k
	}
	return rules.DefaultMainKey
}

// NormalizeAccountID is OpenClaw's normalizeAccountId: a valid id
// lower-cased, an invalid one repaired (runs of other characters become
// "-", cut to 64), blank or unrepairable the default account.
func NormalizeAccountID(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	if a == "" {
		return DefaultAccountID
	}
	if rules.ValidAgentID(a) {
		return a
	}
	var b strings.Builder
	dash := false
	for _, c := range a {
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '_' || c == '-' {
			b.WriteRune(c)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 64 {
		out = out[:64]
	}
	if out == "" || out == "__proto__" || out == "constructor" || out == "prototype" {
		return DefaultAccountID
	}
	return out
}

// checkKey refuses a routed key the store cannot hold (too long once the
// sender or group id is in it, or holding characters no key may have), so
// the error names the message's ids rather than a key the adapter never sent.
func checkKey(key string) error {
	if len(key) > rules.MaxSessionKeyBytes {
		return inputErr(fmt.Sprintf("the session key this message routes to is %d bytes, over the %d a key may have (its subject would be too long): the sender, group or thread id is too long",
			len(key), rules.MaxSessionKeyBytes))
	}
	if err := rules.ValidateSessionKeyInput(key); err != nil {
		return inputErr("the sender, group or thread id cannot be part of a session key: " + err.Error())
	}
	return nil
}

func inputErr(msg string) error { return &rules.InputError{Msg: msg} }

func sortedKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
