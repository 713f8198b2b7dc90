package record

import (
	"fmt"
	"testing"
)

type echoed struct {
	A string `json:"a"`
	N int    `json:"n,omitempty"`
}

// Decode takes what the echo holds for exactly the bytes given (once), and
// decodes anything else; the echo keeps at most its size.
func TestEchoDecode(t *testing.T) {
	e := NewEcho[echoed](2)
	b := New[echoed](nil, nil, "thing").WithEcho(e)
	v := &echoed{A: "x", N: 1}
	data, err := b.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	e.Put(data, v)
	if got, err := b.Decode(data); err != nil || got != v {
		t.Fatalf("first decode of the bytes put: %p %v, want the value put %p", got, err, v)
	}
	got, err := b.Decode(data)
	if err != nil || got == v || *got != *v {
		t.Fatalf("second decode: %+v %v, want a decoded copy", got, err)
	}
	e.Put(data, v)
	if got, err := b.Decode([]byte(`{"a":"x","n":1} `)); err != nil || got == v || *got != *v {
		t.Fatalf("other bytes: %+v %v, want them decoded", got, err)
	}
	for i := range 3 { // past the bound: the oldest go
		e.Put(fmt.Appendf(nil, `{"a":"%d"}`, i), &echoed{A: fmt.Sprint(i)})
	}
	if e.Take(data) != nil || e.Take([]byte(`{"a":"0"}`)) != nil || e.Take([]byte(`{"a":"2"}`)) == nil {
		t.Fatal("the echo kept more than its size, or not the newest")
	}
	var none *Echo[echoed]
	none.Put(data, v)
	if none.Take(data) != nil {
		t.Fatal("a nil echo holds nothing")
	}
}
