package runtime

import "encoding/json"

// Usage is what a provider reported a turn's model calls cost, in
// OpenClaw's terms: Input excludes the tokens read from the prompt cache
// (CacheRead) and written to it (CacheWrite), so the four add up to what
// the calls consumed. Over several calls (a tool loop) the counters add
// up; Prompt and LastOutput are the last call's, which is what the
// session's context holds after the turn.
type Usage struct {
	Input      int64
	Output     int64
	CacheRead  int64
	CacheWrite int64
	// Prompt is the last call's whole prompt (input plus cache) and
	// LastOutput its reply.
	Prompt     int64
	LastOutput int64
	Calls      int
}

// Total is every token the calls consumed.
func (u *Usage) Total() int64 { return u.Input + u.Output + u.CacheRead + u.CacheWrite }

// ContextTokens is the context's size after the turn: the last prompt
// and its reply.
func (u *Usage) ContextTokens() int64 { return u.Prompt + u.LastOutput }

// add counts one call's usage.
func (u *Usage) add(c Usage) {
	u.Input += c.Input
	u.Output += c.Output
	u.CacheRead += c.CacheRead
	u.CacheWrite += c.CacheWrite
	u.Prompt, u.LastOutput = c.Input+c.CacheRead+c.CacheWrite, c.Output
	u.Calls++
}

// addUsage counts a call's usage into *into (allocated on the first one).
func addUsage(into **Usage, c *Usage) {
	if c == nil {
		return
	}
	if *into == nil {
		*into = &Usage{}
	}
	(*into).add(*c)
}

// openAIUsage is chat-completions' usage object with the cache fields
// compatible servers add: OpenAI's prompt_tokens_details.cached_tokens,
// Anthropic-style cache_read_input_tokens/cache_creation_input_tokens and
// OpenRouter's cache_write_tokens.
type openAIUsage struct {
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	Details          struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CacheRead  int64 `json:"cache_read_input_tokens"`
	CacheWrite int64 `json:"cache_creation_input_tokens"`
}

// parseUsage reads a response's usage; nil when there is none (a provider
// that reports none, or a null).
func parseOpenAIUsage(raw json.RawMessage) *Usage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var o openAIUsage
	if json.Unmarshal(raw, &o) != nil || (o.PromptTokens == nil && o.CompletionTokens == 0) {
		return nil
	}
	u := &Usage{Output: o.CompletionTokens}
	u.CacheRead = max(o.Details.CachedTokens, o.CacheRead)
	u.CacheWrite = max(o.Details.CacheWriteTokens, o.CacheWrite)
	if o.PromptTokens != nil {
		// prompt_tokens counts the cached tokens too: Input is the rest
		u.Input = max(*o.PromptTokens-u.CacheRead-u.CacheWrite, 0)
	}
	return u
}
