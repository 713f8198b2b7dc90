package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on the shape of a parameters object. No tool parameter nests more
// than a few levels (attachments[].content) or has a name longer than a
// few words, so anything past these is not a call any tool describes.
const (
	MaxParamsDepth  = 64
	MaxParamNameLen = 128
)

// checkEnvelope refuses bodies that are JSON but not a safe parameters
// object: invalid UTF-8 (encoding/json would silently turn it into U+FFFD,
// so a key could change under the caller), nesting past MaxParamsDepth,
// a name given twice in one object (parsers disagree on which one wins, so
// a proxy and the worker could read different calls) and over-long names.
// Numbers are left to the readers, which refuse one out of range in words
// naming the parameter; NUL characters to RefuseNUL. A syntax error is not reported here:
// ParseParams' decoder reports it in its usual words.
func checkEnvelope(body []byte) error {
	if !utf8.Valid(body) {
		i := 0
		for i < len(body) {
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return inputError(fmt.Sprintf("request body is not valid UTF-8 (bad byte 0x%02X at byte %d); send the tool parameters as UTF-8 JSON", body[i], i))
	}
	if envelopeClean(body) {
		return nil
	}
	return checkEnvelopeTokens(body)
}

// checkEnvelopeTokens is checkEnvelope's scan with the decoder's tokens:
// the one that words every refusal.
func checkEnvelopeTokens(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []envFrame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder words
		}
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				afterValue(stack)
				continue
			}
			name, _ := tok.(string)
			top := &stack[len(stack)-1]
			if n := utf8.RuneCountInString(name); n > MaxParamNameLen {
				return inputError(fmt.Sprintf("a parameter name is %d characters long (%s); tool parameter names are at most %d characters", n, echoKey(name), MaxParamNameLen))
			}
			if _, dup := top.names[name]; dup {
				return inputError(fmt.Sprintf("parameter %s appears twice in one object; send each parameter once", echoKey(name)))
			}
			if top.names == nil {
				top.names = make(map[string]struct{}, 8)
			}
			top.names[name] = struct{}{}
			top.expectKey = false
			continue
		}
		if v, ok := tok.(json.Delim); ok {
			switch v {
			case '{', '[':
				if len(stack) >= MaxParamsDepth {
					return inputError(fmt.Sprintf("parameters nest more than %d levels deep; no tool parameter nests that deep", MaxParamsDepth))
				}
				stack = append(stack, envFrame{object: v == '{', expectKey: v == '{'})
				continue
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		}
		afterValue(stack)
	}
}

// Bounds of envelopeClean's scan; past them it leaves the body to the
// decoder's scan.
const (
	cleanScanNames   = 64 // names of the open objects kept for the duplicate check
	cleanNamesInline = 32 // of those, kept without allocating
)

// envelopeClean reports that body holds nothing checkEnvelope refuses,
// without the decoder's scan: encoding/json's Token allocates for every
// token, a good part of the cost of a small tool call. It follows the JSON
// structure byte by byte (strings, brackets and the literals between them,
// names being the strings where an object expects one), and says true only
// when the body stays within MaxParamsDepth, every name is at most
// MaxParamNameLen characters and none repeats in its object. Anything else
// (a refusal, a name with an escape, a string left open, an object with
// more names than it keeps, a byte where a name belongs) is false and
// checkEnvelopeTokens decides, wording the refusal; so a body this accepts
// is one the token scan accepts too. Syntax is not checked: the decoder
// reports it, and up to a syntax error both scans see the same tokens.
func envelopeClean(body []byte) bool {
	type frame struct {
		object, expectKey bool
		names             int // where this object's names start in names
	}
	var stackBuf [16]frame
	var namesBuf [cleanNamesInline][2]int // start and end of each name in body
	stack, names := stackBuf[:0], namesBuf[:0]
	afterValue := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
	for i := 0; i < len(body); {
		c := body[i]
		expectKey := len(stack) > 0 && stack[len(stack)-1].expectKey
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':':
			i++
		case c == '{' || c == '[':
			if expectKey || len(stack) >= MaxParamsDepth {
				return false
			}
			stack = append(stack, frame{object: c == '{', expectKey: c == '{', names: len(names)})
			i++
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return false
			}
			names = names[:stack[len(stack)-1].names]
			stack = stack[:len(stack)-1]
			afterValue()
			i++
		case c == '"':
			j, escaped := i+1, false
			for j < len(body) && body[j] != '"' {
				if body[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			if j >= len(body) {
				return false // left open
			}
			if expectKey {
				name := body[i+1 : j]
				if escaped || utf8.RuneCount(name) > MaxParamNameLen || len(names) >= cleanScanNames {
					return false
				}
				for _, o := range names[stack[len(stack)-1].names:] {
					if bytes.Equal(body[o[0]:o[1]], name) {
						return false
					}
				}
				names = append(names, [2]int{i + 1, j})
				stack[len(stack)-1].expectKey = false
			} else {
				afterValue()
			}
			i = j + 1
		default: // a number, true, false or null: up to the next delimiter
			if expectKey {
				return false
			}
			for i < len(body) && !jsonDelimiter(body[i]) {
				i++
			}
			afterValue()
		}
	}
	return true
}

// jsonDelimiter reports a byte that ends a literal.
func jsonDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}

// envFrame is one open object or array of checkEnvelope's scan.
type envFrame struct {
	object    bool
	expectKey bool // an object whose next token is a name or its end
	names     map[string]struct{}
}

// afterValue notes that a value was read: in an object, a name comes next.
func afterValue(stack []envFrame) {
	if n := len(stack); n > 0 && stack[n-1].object {
		stack[n-1].expectKey = true
	}
}

// RefuseNUL refuses parameters with a NUL character (U+0000) in a name or
// a string anywhere in them: NUL reaches subjects, keys, transcripts and
// logs, where C-string tools cut text at it, and no tool parameter needs
// one. Tools check it for every call; the inbound endpoint words its own
// control-character refusals per field instead.
func (p Params) RefuseNUL() error {
	bad, badName := "", false // the first offending name in sorted order, so the message is stable
	for name, v := range p {
		nameHas := strings.IndexByte(name, 0) >= 0
		if (nameHas || hasNUL(v)) && (bad == "" || name < bad) {
			bad, badName = name, nameHas
		}
	}
	switch {
	case badName:
		return inputError(fmt.Sprintf("parameter name %s contains a NUL character (\\u0000); remove it", echoKey(bad)))
	case bad != "":
		return inputError(fmt.Sprintf("parameter %s contains a NUL character (\\u0000); remove it", echoKey(bad)))
	}
	return nil
}

// hasNUL walks a decoded value (its depth is bounded: checkEnvelope
// refused deeper nesting before it was decoded).
func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case []any:
		for _, x := range v {
			if hasNUL(x) {
				return true
			}
		}
	case map[string]any:
		for k, x := range v {
			if strings.IndexByte(k, 0) >= 0 || hasNUL(x) {
				return true
			}
		}
	}
	return false
}
