package bus

import (
	"errors"
	"fmt"
	"strings"
)

// EncodeKey maps a session key onto the KV key and subject alphabet
// ([-/_=.a-zA-Z0-9], no empty tokens). ':' becomes '.', so `agent.main.>`
// selects every session of agent main; '.', '=' and every other byte become
// =XX. A ':' that would leave an empty token (leading, trailing or doubled)
// is written =3A instead, so every key, however odd, has a valid encoding.
func EncodeKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 8)
	tokenLen := 0
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == ':':
			nextEmpty := i+1 >= len(key) || key[i+1] == ':'
			if tokenLen == 0 || nextEmpty {
				b.WriteString("=3A")
				tokenLen += 3
			} else {
				b.WriteByte('.')
				tokenLen = 0
			}
		case c == '-' || c == '_' || c == '/' ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'):
			b.WriteByte(c)
			tokenLen++
		default:
			fmt.Fprintf(&b, "=%02X", c)
			tokenLen += 3
		}
	}
	return b.String()
}

// DecodeKey reverses EncodeKey.
func DecodeKey(enc string) (string, error) {
	var b strings.Builder
	b.Grow(len(enc))
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch c {
		case '.':
			b.WriteByte(':')
		case '=':
			if i+2 >= len(enc) {
				return "", errors.New("truncated escape in encoded key " + enc)
			}
			v, ok := unhex(enc[i+1], enc[i+2])
			if !ok {
				return "", errors.New("bad escape in encoded key " + enc)
			}
			b.WriteByte(v)
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func unhex(a, b byte) (byte, bool) {
	h, ok1 := hexVal(a)
	l, ok2 := hexVal(b)
	return h<<4 | l, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
