package runtime

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
)

// maxSSELine bounds one line of a stream: a chunk carries a few tokens, so
// a longer line is a broken endpoint, not a big reply.
const maxSSELine = 1 << 20

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// chatChunk is one streamed chat-completions chunk.
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string         `json:"content"`
			ToolCalls []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// streamedCall is one tool call put together from its deltas.
type streamedCall struct {
	id, name string
	args     bytes.Buffer
}

// countingReader counts what it reads, so a stream over the response bound
// is told apart from one that ended.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// errStreamTooLarge ends a stream that outgrew the response bound.
var errStreamTooLarge = errors.New("stream too large")

// readStream reads server-sent events (`data: {chunk}` lines, blank lines
// between events, `data: [DONE]` at the end) and puts the first choice's
// message together as the non-streaming response would carry it: its text
// and its tool_calls array, each call's argument pieces joined. Text deltas
// go to emit as they arrive. A stream that breaks off before [DONE] (and
// before any finish_reason), or carries a chunk that is not JSON, is a run
// error: the turn then records no reply at all.
func (r *openAIRuntime) readStream(body io.Reader, key string, emit func(string)) (string, json.RawMessage, *Usage, error) {
	cr := &countingReader{r: io.LimitReader(body, maxOpenAIResponse+1)}
	br := bufio.NewReaderSize(cr, 64<<10)
	var (
		content  bytes.Buffer
		calls    = map[int]*streamedCall{}
		data     []byte // the current event's data lines
		finished bool   // a finish_reason was seen
		choices  bool
		usage    *Usage // the usage chunk's (stream_options.include_usage)
	)
	dispatch := func() error {
		if len(data) == 0 {
			return nil
		}
		payload := bytes.TrimSpace(data)
		data = data[:0]
		if string(payload) == "[DONE]" {
			return io.EOF
		}
		var ch chatChunk
		if err := json.Unmarshal(payload, &ch); err != nil {
			return runErrorf("openai: %s: stream chunk is not chat-completions JSON (%v): %s", r.shown, err, excerpt(scrubBytes(payload, key)))
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return runErrorf("openai: %s: endpoint error in the stream: %s", r.shown, excerpt(scrubBytes(ch.Error, key)))
		}
		if u := parseOpenAIUsage(ch.Usage); u != nil {
			usage = u
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			choices = true
			if c.Delta.Content != nil && *c.Delta.Content != "" {
				content.WriteString(*c.Delta.Content)
				emit(*c.Delta.Content)
			}
			for _, d := range c.Delta.ToolCalls {
				addToolCallDelta(calls, d)
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				finished = true
			}
		}
		return nil
	}
	for {
		line, err := readLine(br)
		if err == nil {
			switch {
			case len(line) == 0: // an event ends
				err = dispatch()
			case bytes.HasPrefix(line, []byte("data:")):
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			}
			// other fields (event:, id:, retry:) and comments (":") carry
			// nothing a chat completion needs
		} else if errors.Is(err, io.EOF) {
			derr := errStreamTooLarge
			if cr.n <= maxOpenAIResponse {
				derr = dispatch()
			}
			switch {
			case errors.Is(derr, io.EOF), errors.Is(derr, errStreamTooLarge):
				err = derr
			case !finished:
				// ended without [DONE] and before any choice finished,
				// maybe inside a chunk: cut off, whatever it says
				return "", nil, nil, runErrorf("openai: %s: the stream ended before [DONE] (truncated after %d bytes); no reply is recorded", r.shown, cr.n)
			case derr != nil:
				err = derr
			}
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			if !choices {
				return "", nil, nil, runErrorf("openai: %s: the stream carried no choices", r.shown)
			}
			return content.String(), assembleToolCalls(calls), usage, nil
		case errors.Is(err, errStreamTooLarge):
			return "", nil, nil, runErrorf("openai: %s: response larger than %d MiB", r.shown, maxOpenAIResponse>>20)
		}
		return "", nil, nil, err
	}
}

// readLine reads one line without its line ending; a last line without
// one is returned with a nil error, the end after it as io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxSSELine {
			return nil, runErrorf("openai: a stream line is longer than %d KiB", maxSSELine>>10)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		return bytes.TrimSuffix(line, []byte("\r")), nil
	}
}

func addToolCallDelta(calls map[int]*streamedCall, d toolCallDelta) {
	c := calls[d.Index]
	if c == nil {
		c = &streamedCall{}
		calls[d.Index] = c
	}
	if d.ID != "" {
		c.id = d.ID
	}
	c.name += d.Function.Name
	// arguments arrive as pieces of one JSON-encoded string; a server that
	// sends the object itself sends it whole
	var piece string
	if json.Unmarshal(d.Function.Arguments, &piece) == nil {
		c.args.WriteString(piece)
	} else if len(d.Function.Arguments) > 0 && string(d.Function.Arguments) != "null" {
		c.args.Write(d.Function.Arguments)
	}
}

// assembleToolCalls renders the calls in index order as the tool_calls
// array of a non-streaming response; nil when there are none.
func assembleToolCalls(calls map[int]*streamedCall) json.RawMessage {
	if len(calls) == 0 {
		return nil
	}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type tc struct {
		ID       string `json:"id,omitempty"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	out := make([]tc, 0, len(calls))
	for _, i := range idx {
		c := calls[i]
		out = append(out, tc{ID: c.id, Type: "function", Function: fn{Name: c.name, Arguments: c.args.String()}})
	}
	return mustJSON(out)
}
