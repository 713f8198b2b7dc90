package sessions

import (
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// plainDecoder reads the JSON the store itself writes: an object of
// exact-case known names, each once, whose values are strings without
// escapes, integers, true or false, and objects of the same form. That is
// nearly every stored entry, and reading it without reflection or an
// intermediate struct is what lets a worker load a million sessions in
// seconds. Anything else (an escape, null, a float, a name in another case,
// an unknown or repeated name, invalid UTF-8) makes it fail, and the caller
// decodes the whole value again with the full decoder, whose result is the
// definition: so this never has to know encoding/json's rules for them.
//
// The code that matches names to fields is generated (entry_wire.go).
type plainDecoder struct {
	data []byte
	i    int
	bad  bool
	// in, when set, gives the interned copy of a string it holds instead
	// of a new one: the index's load would otherwise allocate most of an
	// entry's strings only to drop them for those copies (interner.entry).
	in *interner
}

// fail stops the decoder: every later read fails too.
func (d *plainDecoder) fail() {
	d.bad = true
	d.i = len(d.data)
}

func (d *plainDecoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte (0 at the end).
func (d *plainDecoder) peek() byte {
	d.ws()
	if d.i < len(d.data) {
		return d.data[d.i]
	}
	return 0
}

// open reads an object's opening brace: true when a member follows,
// false when the object is empty (or the value is not an object).
func (d *plainDecoder) open() bool {
	if d.peek() != '{' {
		d.fail()
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return false
	}
	return true
}

// next reads what follows a member's value: true when another member
// follows, false at the object's closing brace.
func (d *plainDecoder) next() bool {
	switch d.peek() {
	case ',':
		d.i++
		return true
	case '}':
		d.i++
		return false
	}
	d.fail()
	return false
}

// key reads a member's name and its colon.
func (d *plainDecoder) key() []byte {
	k := d.plain()
	if d.peek() != ':' {
		d.fail()
		return nil
	}
	d.i++
	return k
}

// done reports whether the whole input was one plain object.
func (d *plainDecoder) done() bool {
	d.ws()
	return !d.bad && d.i == len(d.data)
}

// once fails when the member numbered i was already read: which of two
// equal names wins, and how, is the full decoder's business.
func (d *plainDecoder) once(seen []uint64, i int) {
	if seen[i/64]&(1<<(i%64)) != 0 {
		d.fail()
	}
	seen[i/64] |= 1 << (i % 64)
}

// plain reads a string without escapes or control characters, in valid
// UTF-8, and returns its bytes (a slice of the input).
func (d *plainDecoder) plain() []byte {
	if d.peek() != '"' {
		d.fail()
		return nil
	}
	d.i++
	start, ascii := d.i, true
	for ; d.i < len(d.data); d.i++ {
		switch c := d.data[d.i]; {
		case c == '"':
			s := d.data[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				d.fail()
				return nil
			}
			return s
		case c == '\\' || c < 0x20:
			d.fail()
			return nil
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	d.fail()
	return nil
}

// str reads a plain string into a string of its own (never a slice of the
// input, which the caller may reuse or which would stay alive with it).
func (d *plainDecoder) str() string {
	b := d.plain()
	if d.in != nil && len(b) <= internMaxLen {
		if v, ok := d.in.strs[string(b)]; ok {
			return v
		}
	}
	return string(b)
}

// digits reads an integer without sign, fraction or exponent; false when
// there is none or it overflows 64 bits.
func (d *plainDecoder) digits() (uint64, bool) {
	start := d.i
	var n uint64
	for ; d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9'; d.i++ {
		c := uint64(d.data[d.i] - '0')
		if n > (1<<64-1-c)/10 {
			return 0, false
		}
		n = n*10 + c
	}
	// JSON has no leading zeros; what follows the digits ('.', 'e') fails
	// at the next read
	if d.i == start || (d.data[start] == '0' && d.i-start > 1) {
		return 0, false
	}
	return n, true
}

func (d *plainDecoder) uint64() uint64 {
	d.ws()
	n, ok := d.digits()
	if !ok {
		d.fail()
	}
	return n
}

func (d *plainDecoder) int64() int64 {
	neg := d.peek() == '-'
	if neg {
		d.i++
	}
	n, ok := d.digits()
	switch {
	case !ok || n > 1<<63 || (!neg && n == 1<<63):
		d.fail()
		return 0
	case neg:
		return -int64(n)
	}
	return int64(n)
}

func (d *plainDecoder) int() int {
	n := d.int64()
	if int64(int(n)) != n {
		d.fail()
	}
	return int(n)
}

func (d *plainDecoder) bool() bool {
	d.ws()
	rest := d.data[d.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		d.i += 4
		return true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		d.i += 5
		return false
	}
	d.fail()
	return false
}

// full decodes the next value, a kind this decoder leaves to the full
// decoder (a type with its own UnmarshalJSON, a slice), into v, a
// pointer to the zero value of its type.
func (d *plainDecoder) full(v any) {
	d.ws()
	start := d.i
	if d.skip(); d.bad {
		return
	}
	if jsonv2.Unmarshal(d.data[start:d.i], v, decodeOptions) != nil {
		d.fail()
	}
}

// skip passes over one value, finding only where it ends: the full
// decoder validates what it is given.
func (d *plainDecoder) skip() {
	depth := 0
	for ; d.i < len(d.data); d.i++ {
		switch d.data[d.i] {
		case '"':
			for d.i++; d.i < len(d.data) && d.data[d.i] != '"'; d.i++ {
				if d.data[d.i] == '\\' {
					d.i++
				}
			}
			if d.i >= len(d.data) {
				d.fail()
				return
			}
			if depth == 0 {
				d.i++
				return
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of the enclosing object: a scalar ended
				return
			}
			if depth--; depth == 0 {
				d.i++
				return
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return
			}
		}
	}
	if depth > 0 {
		d.fail()
	}
}
