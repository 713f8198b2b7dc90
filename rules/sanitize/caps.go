package sanitize

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// HistoryMaxBytes is SESSIONS_HISTORY_MAX_BYTES, the cap on the compact JSON
// of the messages sessions_history returns.
const HistoryMaxBytes = 80 * 1024

// OmittedPlaceholder replaces a single message that alone exceeds the cap.
const OmittedPlaceholder = "[sessions_history omitted: message too large]"

// CapByJSONBytes applies capArrayByJsonBytes and then the hard cap
// (the 80 KiB history budget and its placeholder; docs/tools.md).
//
// Items must be compact JSON (no insignificant whitespace), as
// JSON.stringify produces; CompactJSON and MarshalCompact make them. The
// array's size is 2 + Σ len(item) + (n-1). While it exceeds max and more than
// one item remains, the oldest item is dropped. If it still exceeds max, the
// last item is kept alone when it fits, else everything is replaced by one
// placeholder message carrying the replaced message's __openclaw.seq.
//
// dropped is the tool's droppedMessages (rows dropped or the hard cap
// applied); hardCapped reports the hard cap alone; bytes is the UTF-8 length
// of the final array as compact JSON.
func CapByJSONBytes(items []json.RawMessage, max int) (kept []json.RawMessage, dropped, hardCapped bool, bytes int) {
	size := func(xs []json.RawMessage) int {
		if len(xs) == 0 {
			return 2
		}
		n := 2 + len(xs) - 1
		for _, x := range xs {
			n += len(x)
		}
		return n
	}
	kept = items
	bytes = size(items)
	start := 0
	for bytes > max && start < len(items)-1 {
		bytes -= len(items[start]) + 1
		start++
	}
	kept = items[start:]
	dropped = start > 0
	if bytes <= max {
		return kept, dropped, false, bytes
	}
	var last json.RawMessage
	if len(kept) > 0 {
		last = kept[len(kept)-1]
		lastOnly := []json.RawMessage{last}
		if b := size(lastOnly); b <= max {
			return lastOnly, true, true, b
		}
	}
	ph := placeholderMessage(last)
	return []json.RawMessage{ph}, true, true, size([]json.RawMessage{ph})
}

// placeholderMessage builds {"role":"assistant","content":OmittedPlaceholder}
// in the reference's key order, adding "__openclaw":{"seq":N} when the
// replaced message has a positive safe-integer seq.
func placeholderMessage(replaced json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"role":"assistant","content":`)
	content, _ := json.Marshal(OmittedPlaceholder)
	b.Write(content)
	if seq, ok := messageSeq(replaced); ok {
		b.WriteString(`,"__openclaw":{"seq":`)
		b.WriteString(strconv.FormatInt(seq, 10))
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes()
}

const maxSafeInteger = 1<<53 - 1

// messageSeq reads __openclaw.seq when it is a positive safe integer
// (JavaScript's Number.isSafeInteger, so 3.0 counts and 3.5 does not).
func messageSeq(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var msg struct {
		Meta json.RawMessage `json:"__openclaw"`
	}
	if json.Unmarshal(raw, &msg) != nil || len(msg.Meta) == 0 || msg.Meta[0] != '{' {
		return 0, false
	}
	var meta struct {
		Seq json.RawMessage `json:"seq"`
	}
	if json.Unmarshal(msg.Meta, &meta) != nil || len(meta.Seq) == 0 || meta.Seq[0] == '"' {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(meta.Seq, &n) != nil {
		return 0, false
	}
	return safeInteger(n)
}

func safeInteger(n json.Number) (int64, bool) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f <= 0 || f > maxSafeInteger || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// MarshalCompact encodes v the way JSON.stringify would for the byte cap:
// compact, with '<', '>', '&', U+2028 and U+2029 written as themselves rather
// than Go's \u escapes, so byte counts match the reference.
func MarshalCompact(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeLineSeparators(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// CompactJSON removes insignificant whitespace from raw JSON, keeping its
// string escapes as they are.
func CompactJSON(raw []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// unescapeLineSeparators turns the \u2028 and \u2029 escapes that
// encoding/json always writes back into the raw characters.
func unescapeLineSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			out = append(out, c)
			continue
		}
		switch c {
		case '"':
			inString = false
			out = append(out, c)
		case '\\':
			if i+5 < len(b) && b[i+1] == 'u' && b[i+2] == '2' && b[i+3] == '0' && b[i+4] == '2' &&
				(b[i+5] == '8' || b[i+5] == '9') {
				if b[i+5] == '8' {
					out = append(out, "\u2028"...)
				} else {
					out = append(out, "\u2029"...)
				}
				i += 5
				continue
			}
			out = append(out, c)
			if i+1 < len(b) {
				i++
				out = append(out, b[i])
			}
		default:
			out = append(out, c)
		}
	}
	return out
}
