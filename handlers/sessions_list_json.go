package handlers

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The sessions_list reply is written by hand: encoding/json's reflection was
// most of a 100-row call. The output is byte for byte what
// json.Marshal writes for listResult (sessions_list_json_test.go checks it
// against json.Marshal over random rows); rows carrying messages, which are
// raw JSON json.Marshal re-compacts, still go through json.Marshal.

// appendResult writes res as json.Marshal(res) would, using rows[i] as the
// encoding of res.Sessions[i] (rows nil: encoding each row as it goes).
func appendResult(b []byte, res *listResult, rows [][]byte) []byte {
	b = append(b, `{"count":`...)
	b = strconv.AppendInt(b, int64(res.Count), 10)
	b = append(b, `,"sessions":`...)
	if res.Sessions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range res.Sessions {
			if i > 0 {
				b = append(b, ',')
			}
			if rows == nil {
				b = appendRow(b, res.Sessions[i])
			} else {
				b = append(b, rows[i]...)
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"hasMore":`...)
	b = strconv.AppendBool(b, res.HasMore)
	if res.NextOffset != nil {
		b = append(b, `,"nextOffset":`...)
		b = strconv.AppendInt(b, int64(*res.NextOffset), 10)
	}
	b = append(b, `,"limitApplied":`...)
	b = strconv.AppendInt(b, int64(res.LimitApplied), 10)
	if res.TruncationReason != "" {
		b = append(b, `,"truncationReason":`...)
		b = appendJSONString(b, res.TruncationReason)
	}
	if res.EnrichmentOmitted {
		b = append(b, `,"enrichmentOmitted":true`...)
	}
	if v := res.Visibility; v != nil {
		b = append(b, `,"visibility":{"mode":`...)
		b = appendJSONString(b, v.Mode)
		b = append(b, `,"restricted":`...)
		b = strconv.AppendBool(b, v.Restricted)
		b = append(b, `,"warning":`...)
		b = appendJSONString(b, v.Warning)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendRow writes r as json.Marshal(r) would.
func appendRow(b []byte, r *listRow) []byte {
	if len(r.Messages) > 0 {
		enc, _ := json.Marshal(r)
		return append(b, enc...)
	}
	str := appendJSONString
	if r.plain {
		str = appendPlainString
	}
	b = append(b, `{"key":`...)
	b = str(b, r.Key)
	b = appendOptString(b, `,"sessionId":`, r.SessionID, str)
	b = append(b, `,"agentId":`...)
	b = str(b, r.AgentID)
	b = append(b, `,"kind":`...)
	b = str(b, r.Kind)
	b = append(b, `,"channel":`...)
	b = str(b, r.Channel)
	b = append(b, `,"archived":`...)
	b = strconv.AppendBool(b, r.Archived)
	b = append(b, `,"pinned":`...)
	b = strconv.AppendBool(b, r.Pinned)
	b = appendOptString(b, `,"label":`, r.Label, str)
	b = appendOptString(b, `,"group":`, r.Group, str)
	b = appendOptString(b, `,"displayName":`, r.DisplayName, str)
	b = appendOptString(b, `,"derivedTitle":`, r.DerivedTitle, appendJSONString)
	b = appendOptString(b, `,"lastMessagePreview":`, r.LastMessagePreview, appendJSONString)
	b = appendOptString(b, `,"parentSessionKey":`, r.ParentSessionKey, str)
	if r.UpdatedAt != 0 {
		b = append(b, `,"updatedAt":`...)
		b = strconv.AppendInt(b, r.UpdatedAt, 10)
	}
	if r.StateVersion != 0 {
		b = append(b, `,"stateVersion":`...)
		b = strconv.AppendUint(b, r.StateVersion, 10)
	}
	b = appendOptString(b, `,"model":`, r.Model, str)
	if r.ContextTokens != 0 {
		b = append(b, `,"contextTokens":`...)
		b = strconv.AppendInt(b, r.ContextTokens, 10)
	}
	if r.TotalTokens != 0 {
		b = append(b, `,"totalTokens":`...)
		b = strconv.AppendInt(b, r.TotalTokens, 10)
	}
	b = appendOptString(b, `,"status":`, r.Status, str)
	if r.AbortedLastRun {
		b = append(b, `,"abortedLastRun":true`...)
	}
	if r.Goal != nil { // few rows: encoding/json's bytes, as json.Marshal(r) nests them
		enc, _ := json.Marshal(r.Goal)
		b = append(append(b, `,"goal":`...), enc...)
	}
	if len(r.ChildSessions) > 0 {
		b = append(b, `,"childSessions":[`...)
		str := appendJSONString
		if r.plainKids {
			str = appendPlainString
		}
		for i, c := range r.ChildSessions {
			if i > 0 {
				b = append(b, ',')
			}
			b = str(b, c)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendOptString(b []byte, name, s string, str func([]byte, string) []byte) []byte {
	if s == "" {
		return b
	}
	return str(append(b, name...), s)
}

// appendPlainString is appendJSONString for a string jsonPlainStrings
// accepted.
func appendPlainString(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// jsonPlainStrings reports whether no byte of ss is one appendJSONString
// escapes.
func jsonPlainStrings(ss ...string) bool {
	for _, s := range ss {
		for i := 0; i < len(s); i++ {
			if !jsonPlain[s[i]] {
				return false
			}
		}
	}
	return true
}

// jsonPlain is the bytes appendJSONString writes as they are: printable
// ASCII but for " \ < > &.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString is encoding/json's string encoding with its default
// HTML escaping: <, > and & as \u003c..., control bytes as \b \f \n \r \t
// or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if jsonPlain[s[i]] { // most bytes of most strings: one lookup each
			i++
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
