package handlers

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// redactError masks credentials in a thrown error's message: messages
// quote the caller's arguments (an invalid key, a label), and a secret
// pasted into one must not come back in a reply or a service error header.
// Other errors become a bare 500 at the transport, their text only logged
// (through the redacting log handler).
func (d *Deps) redactError(err error) error {
	var be *bus.Error
	if !errors.As(err, &be) {
		return err
	}
	if msg := d.Redactor.ErrorText(be.Message); msg != be.Message {
		masked := *be // keeps the code and a 429's retry-after
		masked.Message = msg
		return &masked
	}
	return err
}

// redactsWholeResult names the tools whose results redactResult masks
// whole. sessions_history and sessions_list are not among them: their text
// is the transcript's, redacted message by message where it is read
// (HistoryMessage, the list's lastMessage preview and messages) and cached
// so; a second pass over a 30 KiB list reply took list_10k from 4.4x to
// 20x a raw request-reply (bench, 2 CPUs). What they echo of the caller's own input (the
// key sessions_history was asked for) is masked where they build it.
var redactsWholeResult = map[string]bool{
	"agents_list": true, "session_status": true, "sessions_send": true,
	"sessions_spawn": true, "sessions_yield": true, "subagents": true,
}

// redactResult masks credentials in every string of a tool's result: run
// errors, replies, tasks, labels and previews all come from text a model
// or a caller wrote. It works on the decoded strings, not the encoded
// reply: in JSON text a newline is "\n", which hides the word boundary
// most patterns start at ("\nsk-…"), and quotes are escaped.
func (d *Deps) redactResult(res any) (any, error) {
	if c, ok := res.(checkedResult); ok {
		return json.RawMessage(c), nil
	}
	b, ok := res.(json.RawMessage) // already encoded: no second compaction pass
	if !ok {
		var err error
		if b, err = json.Marshal(res); err != nil {
			return nil, err
		}
	}
	// Most replies hold nothing to mask: one scan of all their strings,
	// each on a line of its own, says so without redacting string by string.
	if !d.Redactor.MayMask(jsonStrings(b)) {
		return json.RawMessage(b), nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	changed := false
	v = d.redactValue(v, &changed)
	if !changed {
		return json.RawMessage(b), nil
	}
	return v, nil
}

// checkedResult is an encoded result whose tool has already found that
// redactResult would mask nothing in it (spawnReply): it is passed on as
// is.
type checkedResult json.RawMessage

// MarshalJSON is the result as encoded.
func (c checkedResult) MarshalJSON() ([]byte, error) { return c, nil }

// constVerdicts caches MayMask of constant texts (a tool's fixed notes),
// by redactor: the verdict on a constant never changes.
var constVerdicts sync.Map // constText -> bool

type constText struct {
	r    *sanitize.Redactor
	text string
}

// mayMaskConst is d.Redactor.MayMask(text) for a text that is a constant
// of the code, computed once per redactor.
func (d *Deps) mayMaskConst(text string) bool {
	k := constText{d.Redactor, text}
	if v, ok := constVerdicts.Load(k); ok {
		return v.(bool)
	}
	v := d.Redactor.MayMask(text)
	constVerdicts.Store(k, v)
	return v
}

func (d *Deps) redactValue(v any, changed *bool) any {
	switch x := v.(type) {
	case string:
		s, c := d.Redactor.ToolPayload(x)
		*changed = *changed || c
		return s
	case []any:
		for i := range x {
			x[i] = d.redactValue(x[i], changed)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			rk, c := d.Redactor.ToolPayload(k) // a map keyed by caller text
			*changed = *changed || c
			out[rk] = d.redactValue(e, changed)
		}
		return out
	}
	return v
}

// jsonStrings is every string (names too) of the valid JSON b, decoded,
// one per line: the text a redactor must see to judge the strings the way
// it will judge each alone (a newline is a boundary to every pattern).
func jsonStrings(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		for i++; i < len(b) && b[i] != '"'; i++ {
			if b[i] != '\\' {
				out.WriteByte(b[i])
				continue
			}
			i++
			if i >= len(b) {
				break
			}
			switch c := b[i]; c {
			case 'n':
				out.WriteByte('\n')
			case 't':
				out.WriteByte('\t')
			case 'r':
				out.WriteByte('\r')
			case 'b':
				out.WriteByte('\b')
			case 'f':
				out.WriteByte('\f')
			case 'u':
				if i+4 < len(b) {
					if n, err := strconv.ParseUint(string(b[i+1:i+5]), 16, 32); err == nil {
						out.WriteRune(rune(n)) // a lone surrogate becomes U+FFFD, as json decodes it
						i += 4
						continue
					}
				}
				out.WriteRune(utf8.RuneError)
			default: // " \ /
				out.WriteByte(c)
			}
		}
		out.WriteByte('\n')
	}
	return out.String()
}
