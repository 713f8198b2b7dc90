package rules

import (
	"regexp"
	"strings"
)

// Chat types returned by ChatTypeFromKey.
const (
	ChatGroup   = "group"
	ChatChannel = "channel"
	ChatDirect  = "direct"
	ChatUnknown = "unknown"
)

var (
	bareGroupRe     = regexp.MustCompile(`^group:[^:]+$`)
	whatsappGroupRe = regexp.MustCompile(`^[0-9]+(?:-[0-9]+)*@g\.us$`)
	discordGuildRe  = regexp.MustCompile(`^discord:(?:[^:]+:)?guild-[^:]+:channel-[^:]+$`)
)

// ChatTypeFromKey derives group|channel|direct|unknown from a key alone, for
// rows and send-policy decisions that carry no explicit chat type.
func ChatTypeFromKey(k string) string {
	scoped := restOrRaw(k)
	if scoped == "" {
		return ChatUnknown
	}
	tokens := map[string]bool{}
	for _, t := range nonEmptySegments(scoped) {
		tokens[t] = true
	}
	switch {
	case tokens["group"]:
		return ChatGroup
	case tokens["channel"]:
		return ChatChannel
	case tokens["direct"] || tokens["dm"]:
		return ChatDirect
	case bareGroupRe.MatchString(scoped), whatsappGroupRe.MatchString(scoped), isWhatsAppGroupJID(scoped):
		return ChatGroup
	case discordGuildRe.MatchString(scoped):
		return ChatChannel
	}
	return ChatUnknown
}

// isWhatsAppGroupJID stands in for /^whatsapp:(?!.*:group:).+@g\.us$/, whose
// negative lookahead RE2 cannot express. JavaScript's "." stops at line
// terminators, hence the explicit check.
func isWhatsAppGroupJID(s string) bool {
	rest, ok := strings.CutPrefix(s, "whatsapp:")
	if !ok || strings.ContainsAny(rest, "\n\r\u2028\u2029") || strings.Contains(rest, ":group:") {
		return false
	}
	return len(rest) > len("@g.us") && strings.HasSuffix(rest, "@g.us")
}

// normalizeChatType maps the chat types a config or store may carry onto the
// three the rules compare; "dm" is the legacy spelling of "direct".
// Anything else (including "unknown") is no chat type at all.
func normalizeChatType(v string) string {
	switch lowerTrim(v) {
	case "direct", "dm":
		return ChatDirect
	case "group":
		return ChatGroup
	case "channel":
		return ChatChannel
	}
	return ""
}

// ChannelFromKey is the channel a "<channel>:group|channel:<id>" key names,
// or "" (session_status infers a route origin from it for old entries).
func ChannelFromKey(k string) string { return channelFromKey(k) }

// channelFromKey reads the channel out of "<channel>:group|channel:<id>"
// (after the agent prefix); other shapes carry no channel.
func channelFromKey(k string) string {
	parts := nonEmptySegments(restOrRaw(k))
	if len(parts) >= 3 && (parts[1] == "group" || parts[1] == "channel") {
		return parts[0]
	}
	return ""
}
