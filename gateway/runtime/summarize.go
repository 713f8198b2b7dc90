package runtime

import (
	"context"
	"encoding/json"
	"os"
	"strings"
)

// Summarizer is a runtime whose model can write a compaction summary.
// The gateway asks it when a session's context no longer fits its model's
// window, and for `sessionbus session compact`.
type Summarizer interface {
	Summarize(ctx context.Context, req SummaryRequest) (string, *Usage, error)
	// CanSummarize reports whether the runtime is set up to summarize
	// (a script runtime needs script.summary).
	CanSummarize() bool
}

// CanSummarize is true: the endpoint's model writes the summary.
func (r *openAIRuntime) CanSummarize() bool { return true }

// SummaryRequest is one summarization call: the conversation to condense
// (SerializeConversation's text) and the summary of what came before it,
// if any, which the new summary must carry forward.
type SummaryRequest struct {
	Model           string
	Conversation    string
	PreviousSummary string
	// Instructions are an operator's extra focus ("/compact Focus on …").
	Instructions string
}

// The summarization prompt has OpenClaw's shape: a system prompt that
// forbids continuing the conversation, the conversation between tags, and
// a fixed section layout, with an update variant that merges a previous
// summary instead of summarizing a summary.
const summarySystemPrompt = "You are a context summarization assistant. You read a conversation between a user and an AI assistant and write a structured summary in the exact format asked for. Do not continue the conversation and do not answer questions in it: output only the summary."

const summaryFormat = `## Goal
[What the user is trying to accomplish]

## Constraints & Preferences
- [Requirements and preferences the user stated]

## Progress
### Done
- [x] [Completed work]
### In Progress
- [ ] [Current work]
### Blocked
- [Open problems, if any]

## Key Decisions
- **[Decision]**: [Why]

## Next Steps
1. [What should happen next]

## Critical Context
- [Names, identifiers, paths, values and data needed to continue]

Keep every section short. Keep identifiers (ids, keys, paths, URLs) exactly as written.`

const summaryPrompt = "The messages above are a conversation to summarize. Write a structured context checkpoint summary that another model will use to continue the work.\n\nUse this exact format:\n\n" + summaryFormat

const summaryUpdatePrompt = "The messages above are new conversation to merge into the previous summary given in <previous-summary> tags. Keep what it says unless the new messages change it, move finished items to Done, add new decisions and context, and update the next steps. Do not summarize the summary: merge into it.\n\nUse this exact format:\n\n" + summaryFormat

// summaryMessages is the request's messages.
func summaryMessages(req SummaryRequest) []chatMessage {
	var b strings.Builder
	b.WriteString("<conversation>\n")
	b.WriteString(req.Conversation)
	b.WriteString("\n</conversation>\n\n")
	prompt := summaryPrompt
	if strings.TrimSpace(req.PreviousSummary) != "" {
		b.WriteString("<previous-summary>\n")
		b.WriteString(req.PreviousSummary)
		b.WriteString("\n</previous-summary>\n\n")
		prompt = summaryUpdatePrompt
	}
	b.WriteString(prompt)
	if s := strings.TrimSpace(req.Instructions); s != "" {
		b.WriteString("\n\nAdditional focus: ")
		b.WriteString(s)
	}
	return []chatMessage{
		{Role: "system", Content: text(summarySystemPrompt)},
		{Role: "user", Content: text(b.String())},
	}
}

// SummaryOverhead is the estimated size of the summarization prompt
// without its conversation and previous summary.
var SummaryOverhead = EstimateText(len(summarySystemPrompt) + len(summaryUpdatePrompt) + 80)

// SerializeConversation renders transcript entries as the plain text a
// summarization call reads: one "[User]: …", "[Assistant]: …",
// "[Assistant tool calls]: name(args)" or "[Tool result]: …" paragraph
// per message, so the model reads the conversation rather than
// continuing it.
func SerializeConversation(raw []json.RawMessage) string {
	var parts []string
	for _, e := range raw {
		for _, m := range entryMessages(e) {
			content := ""
			if m.Content != nil {
				content = *m.Content
			}
			switch m.Role {
			case "user":
				parts = append(parts, "[User]: "+content)
			case "assistant":
				if content != "" {
					parts = append(parts, "[Assistant]: "+content)
				}
				if calls, _ := parseToolCalls(m.ToolCalls); len(calls) > 0 {
					var cs []string
					for _, c := range calls {
						args, _ := toolArgs(c.Function.Arguments)
						cs = append(cs, c.Function.Name+"("+string(args)+")")
					}
					parts = append(parts, "[Assistant tool calls]: "+strings.Join(cs, "; "))
				}
			case "tool":
				parts = append(parts, "[Tool result]: "+content)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

// Summarize asks the endpoint for a summary, without tools. An empty
// reply is an error: the gateway then writes no compaction entry.
func (r *openAIRuntime) Summarize(ctx context.Context, req SummaryRequest) (string, *Usage, error) {
	key := ""
	if r.keyEnv != "" {
		if key = os.Getenv(r.keyEnv); key == "" {
			return "", nil, runErrorf("openai: environment variable %s (openai.apiKeyEnv) is empty", r.keyEnv)
		}
	}
	model := r.model
	if m := strings.TrimSpace(req.Model); m != "" {
		model = m
	}
	content, _, usage, err := r.complete(ctx, key, chatRequest{Model: model, Messages: summaryMessages(req)}, func(string) {})
	if err != nil {
		return "", usage, err
	}
	if strings.TrimSpace(content) == "" {
		return "", usage, runErrorf("openai: %s: the compaction summary came back empty; the session was not compacted", r.shown)
	}
	return strings.TrimSpace(content), usage, nil
}
