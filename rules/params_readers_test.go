package rules

import "testing"

func TestEnum(t *testing.T) {
	p := mustParams(t, `{"mode":"  Session ","blank":"","other":"forever","num":3}`)
	if v, ok, err := p.Enum("mode", "", "run", "session"); v != "session" || !ok || err != nil {
		t.Errorf("mode = %q %v %v, want session", v, ok, err)
	}
	for _, name := range []string{"absent", "blank"} {
		if v, ok, err := p.Enum(name, "run", "run", "session"); v != "run" || ok || err != nil {
			t.Errorf("%s = %q %v %v, want the default, absent", name, v, ok, err)
		}
	}
	_, _, err := p.Enum("other", "", "run", "session")
	wantInputError(t, "other", err, `other must be "run" or "session" (got "forever")`)
	_, _, err = p.Enum("num", "", "run")
	wantInputError(t, "num", err, "num must be a string")
}

func TestNumber(t *testing.T) {
	p := mustParams(t, `{"a":2.5,"b":" 7 ","c":"","d":null,"e":"NaN","f":true,"g":"1e400","h":"x","i":-3}`)
	for name, want := range map[string]float64{"a": 2.5, "b": 7, "i": -3} {
		if v, ok, err := p.Number(name); v != want || !ok || err != nil {
			t.Errorf("%s = %v %v %v, want %v", name, v, ok, err, want)
		}
	}
	for _, name := range []string{"c", "d", "absent"} {
		if v, ok, err := p.Number(name); v != 0 || ok || err != nil {
			t.Errorf("%s = %v %v %v, want absent", name, v, ok, err)
		}
	}
	for _, name := range []string{"e", "f", "g", "h"} {
		_, _, err := p.Number(name)
		wantInputError(t, name, err, name+" must be a number")
	}
	if v, ok, err := (Params{"n": 4}).Number("n"); v != 4 || !ok || err != nil {
		t.Errorf("a Go int = %v %v %v, want 4", v, ok, err)
	}
	if v, ok, err := (Params{"n_x": "5"}).Number("nX"); v != 5 || !ok || err != nil {
		t.Errorf("the snake_case alias = %v %v %v, want 5", v, ok, err)
	}
}

func TestTimeoutSeconds(t *testing.T) {
	p := mustParams(t, `{"a":2.9,"b":"30","c":0,"d":"","neg":-1,"big":3e9,"s":"soon","t":true}`)
	for name, want := range map[string]int{"a": 2, "b": 30, "c": 0} {
		if v, ok, err := p.TimeoutSeconds(name); v != want || !ok || err != nil {
			t.Errorf("%s = %v %v %v, want %v", name, v, ok, err, want)
		}
	}
	if v, ok, err := p.TimeoutSeconds("d"); v != 0 || ok || err != nil {
		t.Errorf("blank = %v %v %v, want absent", v, ok, err)
	}
	for _, name := range []string{"neg", "big", "s", "t"} {
		_, _, err := p.TimeoutSeconds(name)
		wantInputError(t, name, err, name+" must be a non-negative number of seconds (0 = no timeout)")
	}
}
