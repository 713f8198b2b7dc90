package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/config"
)

const (
	defaultMaxToolRounds = 8
	defaultOpenAITimeout = 120 * time.Second
	// maxOpenAIResponse bounds what a misbehaving endpoint can make us buffer.
	maxOpenAIResponse = 16 << 20
	// bodyExcerpt is how much of an error body a run error quotes.
	bodyExcerpt = 300
)

// openAIConfig is agents.list[].openai.
type openAIConfig struct {
	BaseURL   string `mapstructure:"baseURL"`
	Model     string `mapstructure:"model"`
	APIKeyEnv string `mapstructure:"apiKeyEnv"`
	// APIKeyFile holds the key instead, so it need not be in the
	// gateway's environment; read at each turn, so a rotated key is used
	// without a restart.
	APIKeyFile     string `mapstructure:"apiKeyFile"`
	MaxToolRounds  *int   `mapstructure:"maxToolRounds"`
	TimeoutSeconds *int   `mapstructure:"timeoutSeconds"`
	SystemPrompt   string `mapstructure:"systemPrompt"`
}

type openAIRuntime struct {
	endpoint  string // <baseURL>/chat/completions
	shown     string // endpoint with any userinfo redacted, for messages
	model     string
	keyEnv    string
	keyFile   string
	rounds    int
	timeout   time.Duration
	system    string
	tools     json.RawMessage
	client    *http.Client
	transport *http.Transport
}

func newOpenAI(key string, raw map[string]any) (*openAIRuntime, error) {
	var c openAIConfig
	if err := decodeSection(key, raw, &c); err != nil {
		return nil, err
	}
	base := strings.TrimRight(strings.TrimSpace(c.BaseURL), "/")
	if base == "" {
		return nil, fmt.Errorf(`%s.baseURL: required, the endpoint's API root, e.g. "http://127.0.0.1:8080/v1"`, key)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf(`%s.baseURL: %s is not an http(s) URL, e.g. "http://127.0.0.1:8080/v1"`, key, quoteShort(redactURL(base)))
	}
	if strings.HasSuffix(u.Path, "/chat/completions") {
		return nil, fmt.Errorf("%s.baseURL: give the API root without /chat/completions (it is appended), e.g. %s",
			key, quoteShort(redactURL(strings.TrimSuffix(base, "/chat/completions"))))
	}
	if strings.TrimSpace(c.Model) == "" {
		return nil, fmt.Errorf("%s.model: required, the model name the endpoint serves", key)
	}
	r := &openAIRuntime{
		model:   strings.TrimSpace(c.Model),
		keyEnv:  strings.TrimSpace(c.APIKeyEnv),
		keyFile: strings.TrimSpace(c.APIKeyFile),
		rounds:  defaultMaxToolRounds,
		timeout: defaultOpenAITimeout,
		system:  c.SystemPrompt,
		tools:   mustJSON(openAITools(nil)),
	}
	r.endpoint = base + "/chat/completions"
	r.shown = redactURL(r.endpoint)
	if r.keyEnv != "" {
		if !envNameRe.MatchString(r.keyEnv) {
			// Never echo the value: the likeliest mistake is pasting the key.
			return nil, fmt.Errorf("%s.apiKeyEnv: must name the environment variable that holds the key (e.g. OPENAI_API_KEY), not the key itself", key)
		}
		if os.Getenv(r.keyEnv) == "" {
			return nil, fmt.Errorf("%s.apiKeyEnv: environment variable %s is not set or empty", key, r.keyEnv)
		}
	}
	if r.keyFile != "" {
		if r.keyEnv != "" {
			return nil, fmt.Errorf("%s: set apiKeyEnv or apiKeyFile, not both", key)
		}
		if _, err := r.apiKey(); err != nil {
			return nil, fmt.Errorf("%s.apiKeyFile: %v", key, err)
		}
	}
	if c.MaxToolRounds != nil {
		if *c.MaxToolRounds < 1 {
			return nil, fmt.Errorf("%s.maxToolRounds: must be 1 or more, got %d", key, *c.MaxToolRounds)
		}
		r.rounds = *c.MaxToolRounds
	}
	if c.TimeoutSeconds != nil {
		if *c.TimeoutSeconds < 1 {
			return nil, fmt.Errorf("%s.timeoutSeconds: must be 1 or more, got %d", key, *c.TimeoutSeconds)
		}
		r.timeout = time.Duration(*c.TimeoutSeconds) * time.Second
	}
	// An own transport so Close can drop its idle connections; the shared
	// default one would keep them (and their goroutines) past the gateway.
	r.transport = http.DefaultTransport.(*http.Transport).Clone()
	r.client = &http.Client{Transport: r.transport}
	return r, nil
}

// Close drops idle connections to the endpoint. The gateway may call it (via
// io.Closer) when it stops; Run still works afterwards.
func (r *openAIRuntime) Close() error {
	r.transport.CloseIdleConnections()
	return nil
}

// apiKey is the key to send: from apiKeyFile (its first line, trimmed) or
// apiKeyEnv, "" when neither is set.
func (r *openAIRuntime) apiKey() (string, error) {
	switch {
	case r.keyFile != "":
		b, err := os.ReadFile(r.keyFile)
		if err != nil {
			return "", fmt.Errorf("read the key file (openai.apiKeyFile): %v", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if k := strings.TrimSpace(line); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("the key file %s (openai.apiKeyFile) is empty", quoteShort(r.keyFile))
	case r.keyEnv != "":
		if k := os.Getenv(r.keyEnv); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("environment variable %s (openai.apiKeyEnv) is empty", r.keyEnv)
	}
	return "", nil
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type chatRequest struct {
	Model    string          `json:"model"`
	Messages []chatMessage   `json:"messages"`
	Tools    json.RawMessage `json:"tools,omitempty"`
	Stream   bool            `json:"stream,omitempty"`
	// StreamOptions asks a streamed reply to end with a usage chunk.
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	// ReasoningEffort is the session's thinking level (ReasoningEffort).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON-encoded string per the API; some compatible
		// servers send the object itself, so both are accepted.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func text(s string) *string { return &s }

// Run is the tool loop: ask, run the requested tools, append their results,
// ask again, until a response asks for no tools or the round bound is hit.
func (r *openAIRuntime) Run(ctx context.Context, t Turn, tools Tools) (*Result, error) {
	key, err := r.apiKey()
	if err != nil {
		return nil, runErrorf("openai: %v", err)
	}
	msgs := r.initialMessages(t)
	model := r.model
	if m := strings.TrimSpace(t.Model); m != "" {
		model = m
	}
	res := &Result{}
	offered := r.tools
	if t.AllowedTools != nil { // only the tools the session's policy allows (rules.ToolPolicy)
		offered = nil
		if len(t.AllowedTools) > 0 {
			offered = mustJSON(openAITools(t.AllowedTools))
		}
	}
	for round := 0; ; round++ {
		msgs = appendSteered(ctx, t, msgs)
		content, rawCalls, usage, err := r.complete(ctx, key, chatRequest{Model: model, Messages: msgs, Tools: offered, ReasoningEffort: ReasoningEffort(t.Thinking)}, t.emitText)
		addUsage(&res.Usage, usage)
		if err != nil {
			return partial(res), err
		}
		calls, err := parseToolCalls(rawCalls)
		if err != nil {
			return partial(res), runErrorf("openai: %s: %v", r.shown, err)
		}
		if len(calls) == 0 {
			res.Reply = content
			return res, nil
		}
		if round == r.rounds {
			return partial(res), runErrorf("openai: tool loop bound hit: the model still asked for tools after %d rounds (openai.maxToolRounds); ending the turn", r.rounds)
		}
		// Keep the provider's own tool_calls array when it is usable as is:
		// some endpoints attach fields (signatures) they need echoed back.
		echo := rawCalls
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = "call_" + strconv.Itoa(round) + "_" + strconv.Itoa(i)
				echo = nil
			}
		}
		if echo == nil {
			echo = rebuildToolCalls(calls)
		}
		am := chatMessage{Role: "assistant", ToolCalls: echo}
		if content != "" {
			am.Content = text(content)
		}
		msgs = append(msgs, am)
		skip := false
		for _, c := range calls {
			if t.Emit != nil {
				args, _ := toolArgs(c.Function.Arguments)
				if !json.Valid(args) {
					args = nil
				}
				t.emitToolCall(c.Function.Name, args)
			}
			// a steered message waits: the calls not started yet are not
			// run, and the model reads the message before deciding again
			skip = skip || (t.Steering != nil && t.Steering.Pending(ctx))
			var call ToolCall
			var reply string
			if skip {
				call, reply = skippedCall(c)
			} else {
				call, reply = r.runTool(ctx, tools, c, t.AllowedTools)
			}
			res.ToolCalls = append(res.ToolCalls, call)
			t.emitToolResult(call)
			if ctx.Err() != nil {
				return res, fmt.Errorf("openai: %s interrupted: %w", c.Function.Name, ctx.Err())
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: c.ID, Content: text(reply)})
			if Yielded(c.Function.Name, call.Result) {
				// sessions_yield ends the turn here: the calls the model
				// asked for after it are not run, and no reply is asked for.
				res.Yielded = true
				return res, nil
			}
		}
	}
}

// appendSteered appends the messages steered into the turn since the last
// model request, as user messages after the tool results they follow.
func appendSteered(ctx context.Context, t Turn, msgs []chatMessage) []chatMessage {
	if t.Steering == nil {
		return msgs
	}
	for _, m := range t.Steering.Drain(ctx) {
		msgs = append(msgs, chatMessage{Role: "user", Content: text(m)})
	}
	return msgs
}

// skippedCall answers a call a steered message overtook: it did not run.
func skippedCall(c chatToolCall) (ToolCall, string) {
	call := ToolCall{Name: c.Function.Name, Err: config.SkippedToolText}
	if params, err := toolArgs(c.Function.Arguments); err == nil && json.Valid(params) {
		call.Params = params
	}
	return call, config.SkippedToolText
}

func partial(res *Result) *Result {
	if len(res.ToolCalls) == 0 && res.Usage == nil {
		return nil
	}
	return res
}

func (r *openAIRuntime) initialMessages(t Turn) []chatMessage {
	var msgs []chatMessage
	var sys []string
	for _, s := range []string{r.system, t.ExtraSystemPrompt} {
		if s = strings.TrimSpace(s); s != "" {
			sys = append(sys, s)
		}
	}
	if len(sys) > 0 {
		msgs = append(msgs, chatMessage{Role: "system", Content: text(strings.Join(sys, "\n\n"))})
	}
	prompt := t.Prompt
	if prompt == "" {
		prompt = t.Message
	}
	hist := historyMessages(t.History)
	// The gateway may append the prompt to the transcript before the turn
	// runs; sending it twice would read to the model as a repeated message.
	if n := len(hist); n > 0 && hist[n-1].Role == "user" && (*hist[n-1].Content == prompt || *hist[n-1].Content == t.Message) {
		hist = hist[:n-1]
	}
	msgs = append(msgs, hist...)
	return append(msgs, chatMessage{Role: "user", Content: text(prompt)})
}

// contentText reads a string content or the text blocks of a block list.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if (b.Type == "text" || b.Type == "output_text") && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func parseToolCalls(raw json.RawMessage) ([]chatToolCall, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var calls []chatToolCall
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, fmt.Errorf("response tool_calls are malformed: %v", err)
	}
	return calls, nil
}

func rebuildToolCalls(calls []chatToolCall) json.RawMessage {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type tc struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	out := make([]tc, len(calls))
	for i, c := range calls {
		args, _ := toolArgs(c.Function.Arguments)
		out[i] = tc{ID: c.ID, Type: "function", Function: fn{Name: c.Function.Name, Arguments: string(args)}}
	}
	return mustJSON(out)
}

// toolArgs turns the arguments field into the params object.
func toolArgs(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(strings.TrimSpace(s))
	}
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return raw, fmt.Errorf("arguments are not a JSON object: %v", err)
	}
	return raw, nil
}

// runTool executes one requested call. Whatever goes wrong is told to the
// model as the tool's result, as a model runtime does, so it can correct
// itself; only the caller's cancellation ends the turn (checked by Run).
func (r *openAIRuntime) runTool(ctx context.Context, tools Tools, c chatToolCall, allowed []string) (ToolCall, string) {
	name := c.Function.Name
	params, err := toolArgs(c.Function.Arguments)
	call := ToolCall{Name: name}
	if json.Valid(params) {
		call.Params = params
	}
	fail := func(msg string) (ToolCall, string) {
		call.Err = msg
		return call, string(mustJSON(map[string]string{"status": "error", "error": msg}))
	}
	if _, ok := toolSpec(name); !ok {
		return fail(fmt.Sprintf("unknown tool %s; available: %s", quoteShort(name), toolNames()))
	}
	if allowed != nil && !slices.Contains(allowed, name) {
		return fail(fmt.Sprintf("tool %s is not offered to this session; available: %s", quoteShort(name), strings.Join(allowed, ", ")))
	}
	if err != nil {
		return fail(err.Error())
	}
	if tools == nil {
		return fail("no tools are available in this turn")
	}
	out, err := tools.Call(ctx, name, params)
	if err != nil {
		return fail(err.Error())
	}
	call.Result = out
	if len(out) == 0 {
		return call, "{}"
	}
	return call, string(out)
}

// complete makes one chat-completions request (q: its model, messages,
// tools and reasoning effort) and returns the first choice's text and raw
// tool_calls. It asks for a stream, whose text deltas go to
// emit as they arrive; an endpoint that answers with one JSON body instead
// is read as before, its text emitted whole.
func (r *openAIRuntime) complete(ctx context.Context, key string, q chatRequest, emit func(string)) (string, json.RawMessage, *Usage, error) {
	q.Stream, q.StreamOptions = true, &streamOptions{IncludeUsage: true}
	body, err := json.Marshal(q)
	if err != nil {
		return "", nil, nil, runErrorf("openai: encoding the request: %v", err)
	}
	reqCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", nil, nil, runErrorf("openai: %s: %v", r.shown, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream, application/json")
	req.Header.Set("User-Agent", "sessionbus")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := r.client.Do(req)
	if err == nil {
		defer resp.Body.Close()
	}
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299 && isEventStream(resp.Header) {
		content, calls, usage, err := r.readStream(resp.Body, key, emit)
		if err != nil {
			return "", nil, nil, r.readErr(ctx, reqCtx, key, err)
		}
		return content, calls, usage, nil
	}
	var data []byte
	if err == nil {
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxOpenAIResponse+1))
	}
	switch {
	case err != nil:
		return "", nil, nil, r.readErr(ctx, reqCtx, key, err)
	case len(data) > maxOpenAIResponse:
		return "", nil, nil, runErrorf("openai: %s: response larger than %d MiB", r.shown, maxOpenAIResponse>>20)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return "", nil, nil, runErrorf("openai: %s: HTTP %s: %s", r.shown, resp.Status, excerpt(scrubBytes(data, key)))
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return "", nil, nil, runErrorf("openai: %s: response is not chat-completions JSON (%v): %s", r.shown, err, excerpt(scrubBytes(data, key)))
	}
	if len(cr.Error) > 0 && string(cr.Error) != "null" {
		return "", nil, nil, runErrorf("openai: %s: endpoint error: %s", r.shown, excerpt(scrubBytes(cr.Error, key)))
	}
	if len(cr.Choices) == 0 {
		return "", nil, nil, runErrorf("openai: %s: response has no choices: %s", r.shown, excerpt(scrubBytes(data, key)))
	}
	m := cr.Choices[0].Message
	content := contentText(m.Content)
	emit(content)
	return content, m.ToolCalls, parseOpenAIUsage(cr.Usage), nil
}

// readErr classifies a failed request or read: the caller's cancellation,
// the runtime's own timeout, a run error of the stream's own, or a
// transport error.
func (r *openAIRuntime) readErr(ctx, reqCtx context.Context, key string, err error) error {
	var re *RunError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("openai: %w", ctx.Err())
	case errors.Is(reqCtx.Err(), context.DeadlineExceeded):
		return &RunError{Timeout: true, Message: fmt.Sprintf("openai: %s: no response within %s (openai.timeoutSeconds)", r.shown, r.timeout)}
	case errors.As(err, &re):
		return err
	}
	// *url.Error already strips URL passwords; the key is only ever in a
	// header, but scrub it anyway in case a proxy echoes it.
	return runErrorf("openai: %s", scrub(err.Error(), key))
}

// excerpt shortens an error body for a run record: the API's error message
// when it has the usual {"error":{"message":...}} shape, else the body's
// start on one line.
func excerpt(data []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		if json.Unmarshal(e.Error, &m) == nil && m.Message != "" {
			data = []byte(m.Message)
		} else if s := contentText(e.Error); s != "" {
			data = []byte(s)
		}
	} else if json.Unmarshal(data, &m) == nil && m.Message != "" {
		data = []byte(m.Message)
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(data), "\uFFFD")), " ")
	if s == "" {
		return "(empty body)"
	}
	if len(s) > bodyExcerpt {
		cut := bodyExcerpt
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func scrubBytes(b []byte, key string) []byte { return []byte(scrub(string(b), key)) }

func scrub(s, key string) string {
	if len(key) < 4 {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}
