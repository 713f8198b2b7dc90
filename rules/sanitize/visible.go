package sanitize

// Profile selects how VisibleText cleans assistant text: for delivery to
// a user, for history, or for internal scaffolding only.
type Profile int

const (
	// Delivery is for text sent to a user or another session: scaffolding
	// stages, then reasoning tags in strict mode, trimmed at both ends.
	Delivery Profile = iota
	// History is for recalled transcript text: the same stages and strict
	// mode, but whitespace is left as it was.
	History
	// InternalScaffolding strips reasoning first in preserve mode, keeps
	// downgraded [Tool ...] text and MiniMax XML, and trims only the start.
	InternalScaffolding
)

// VisibleText removes what an assistant message should never show: MiniMax
// tool XML, leaked model control tokens, <relevant-memories> blocks,
// plain-text tool-call XML, downgraded [Tool Call: ...] scaffolding and
// reasoning tags. Content inside Markdown code spans and fences is kept.
// Unknown profiles behave like Delivery, the reference's default.
func VisibleText(s string, p Profile) string {
	if s == "" {
		return s
	}
	switch p {
	case History:
		return stripReasoningTags(nonReasoningStages(s, false), reasoningStrict, trimNone)
	case InternalScaffolding:
		return trimStartJS(nonReasoningStages(stripReasoningTags(s, reasoningPreserve, trimStart), true))
	default:
		return trimJS(stripReasoningTags(nonReasoningStages(s, false), reasoningStrict, trimBoth))
	}
}

func nonReasoningStages(s string, internal bool) string {
	if !internal {
		s = stripMinimaxToolCallXML(s)
	}
	s = stripModelSpecialTokens(s)
	s = stripRelevantMemories(s)
	s = stripToolCallXML(s)
	if !internal {
		s = stripDowngradedToolText(s)
	}
	return s
}
