package runtime

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
)

// decodeSection decodes one runtime's config map into out. Unknown keys are
// errors: these sections are sessionbus's own (no OpenClaw config to carry
// over), so a key we do not know is a typo whose silent loss would change
// behaviour. Field names match case-insensitively, which matters because
// viper folds every nested key to lower case (delayMs arrives as delayms).
func decodeSection(key string, in map[string]any, out any) error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:      out,
		ErrorUnused: true,
		DecodeHook:  strictHook,
	})
	if err != nil {
		return fmt.Errorf("%s: %v", key, err)
	}
	if err := dec.Decode(in); err != nil {
		return decodeErrors(key, err)
	}
	return nil
}

// decodeErrors rewrites mapstructure's joined, quoted errors into one line
// per problem, each naming the full key as a user would write it.
func decodeErrors(key string, err error) error {
	var msgs []string
	var walk func(error)
	walk = func(err error) {
		var de *mapstructure.DecodeError
		switch {
		case errors.As(err, &de) && !isJoined(err):
			msgs = append(msgs, joinKey(key, de.Name())+": "+describeDecodeErr(de.Unwrap()))
		case isJoined(err):
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				walk(e)
			}
		default:
			if inner := errors.Unwrap(err); inner != nil {
				walk(inner)
				return
			}
			msgs = append(msgs, key+": "+err.Error())
		}
	}
	walk(err)
	if len(msgs) == 0 {
		return fmt.Errorf("%s: %v", key, err)
	}
	return errors.New(strings.Join(msgs, "; "))
}

func isJoined(err error) bool {
	_, ok := err.(interface{ Unwrap() []error })
	return ok
}

func joinKey(key, name string) string {
	switch {
	case name == "":
		return key
	case strings.HasPrefix(name, "["):
		return key + name
	}
	return key + "." + name
}

func describeDecodeErr(err error) string {
	var ut *mapstructure.UnconvertibleTypeError
	if errors.As(err, &ut) {
		return "must be " + typeWord(ut.Expected.Type()) + ", got " + describeValue(ut.Value)
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "has invalid keys: "); ok {
		return "unknown key(s) " + rest
	}
	return msg
}

func typeWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Pointer:
		return typeWord(t.Elem())
	}
	return t.String()
}

func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing (null)"
	case string:
		return "the string " + quoteShort(v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprintf("%v", v)
}

// quoteShort quotes a config value for an error message, cut so a pasted
// prompt does not flood the log.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// strictHook stops mapstructure from silently truncating 1.5 to 1 and gives
// list fields a hint when a single string is written in their place; it also
// lets an unquoted YAML scalar (reply: 42) stand for its text.
func strictHook(from, to reflect.Type, data any) (any, error) {
	if data == nil {
		return data, nil
	}
	if to.Kind() == reflect.Pointer {
		to = to.Elem()
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch v := reflect.ValueOf(data); v.Kind() {
		case reflect.Float32, reflect.Float64:
			f := v.Float()
			if f != math.Trunc(f) || math.IsInf(f, 0) || f > math.MaxInt64 || f < math.MinInt64 {
				return nil, fmt.Errorf("must be a whole number, got %v", f)
			}
			return int64(f), nil
		case reflect.String, reflect.Bool:
			return nil, fmt.Errorf("must be a whole number, got %s", describeValue(data))
		}
	case reflect.String:
		switch v := reflect.ValueOf(data); v.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return strconv.FormatInt(v.Int(), 10), nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return strconv.FormatUint(v.Uint(), 10), nil
		case reflect.Float32, reflect.Float64:
			return strconv.FormatFloat(v.Float(), 'f', -1, 64), nil
		case reflect.Bool:
			return strconv.FormatBool(v.Bool()), nil
		}
	case reflect.Slice:
		switch reflect.ValueOf(data).Kind() {
		case reflect.Slice, reflect.Array:
		case reflect.String:
			if to.Elem().Kind() == reflect.String {
				s := data.(string)
				words := strings.Fields(s)
				for i, w := range words {
					words[i] = quoteShort(w)
				}
				return nil, fmt.Errorf("must be a list of strings, got the string %s; write it as a list, e.g. [%s]", quoteShort(s), strings.Join(words, ", "))
			}
			fallthrough
		default:
			return nil, fmt.Errorf("must be %s, got %s", typeWord(to), describeValue(data))
		}
	case reflect.Struct, reflect.Map:
		if k := reflect.ValueOf(data).Kind(); k != reflect.Map && k != reflect.Struct {
			return nil, fmt.Errorf("must be a mapping, got %s", describeValue(data))
		}
		if m, ok := data.(map[string]any); ok && to.Kind() == reflect.Struct {
			if err := unknownKeys(m, to); err != nil {
				return nil, err
			}
		}
	}
	return data, nil
}

// unknownKeys names the keys of m that no field of struct t takes, with the
// keys it does take, so a typo's fix is in the message.
func unknownKeys(m map[string]any, t reflect.Type) error {
	var known []string
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("mapstructure"), ","); tag != "" && tag != "-" {
			known = append(known, tag)
		}
	}
	var unknown []string
	for k := range m {
		if !slices.ContainsFunc(known, func(f string) bool { return strings.EqualFold(f, k) }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("unknown key(s) %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
}
