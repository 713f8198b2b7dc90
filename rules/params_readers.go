package rules

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Readers for parameters more than one tool could take: a choice among
// fixed values, and OpenClaw's lenient numbers.

// Enum reads a string that must be one of values, compared
// case-insensitively and returned lower-cased; absent (or blank) gives def
// and false. Anything else is refused with the values listed.
func (p Params) Enum(name, def string, values ...string) (string, bool, error) {
	s, ok, err := p.String(name)
	if err != nil || !ok {
		return def, false, err
	}
	v := strings.ToLower(s)
	if slices.Contains(values, v) {
		return v, true, nil
	}
	quoted := make([]string, len(values))
	for i, x := range values {
		quoted[i] = strconv.Quote(x)
	}
	return "", false, inputError(fmt.Sprintf("%s must be %s (got %s)", name, strings.Join(quoted, " or "), strconv.Quote(s)))
}

// Number reads a finite number the lenient way OpenClaw's number readers
// do: a JSON number, or a string holding one (spaces around it ignored;
// blank is absent). A fraction stays a fraction: callers floor or clamp it
// as their parameter needs. NaN, infinities and anything else are refused
// with "<name> must be a number".
func (p Params) Number(name string) (float64, bool, error) {
	raw, ok := p.raw(name)
	if !ok {
		return 0, false, nil
	}
	var f float64
	var err error
	switch v := raw.(type) {
	case json.Number:
		f, err = strconv.ParseFloat(string(v), 64)
	case float64:
		f = v
	case int:
		f = float64(v)
	case string:
		t := strings.TrimSpace(v)
		if t == "" {
			return 0, false, nil
		}
		f, err = strconv.ParseFloat(t, 64)
	default:
		return 0, false, inputError(name + " must be a number")
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, inputError(name + " must be a number")
	}
	return f, true, nil
}

// TimeoutSeconds reads a timeout in whole seconds (0 is no timeout): a
// Number, floored. A negative value, one past math.MaxInt32, or anything
// Number refuses is an error.
func (p Params) TimeoutSeconds(name string) (int, bool, error) {
	f, ok, err := p.Number(name)
	if err != nil || ok && (f < 0 || f > math.MaxInt32) {
		return 0, false, inputError(name + " must be a non-negative number of seconds (0 = no timeout)")
	}
	if !ok {
		return 0, false, nil
	}
	return int(math.Floor(f)), true, nil
}
