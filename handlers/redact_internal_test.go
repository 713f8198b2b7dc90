package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// The one-scan shortcut never skips a reply that has a string to mask:
// secrets after an escaped newline or quote, at a string's start, in a
// name, deep in arrays; and a reply with nothing to mask is left as
// encoded.
func TestRedactResultShortcut(t *testing.T) {
	d := &Deps{Redactor: sanitize.DefaultRedactor()}
	secret := "sk-" + strings.Repeat("Q", 24)
	for _, v := range []any{
		map[string]any{"reply": "line one\n" + secret},
		map[string]any{"reply": `say "` + secret + `"`},
		map[string]any{"rows": []any{map[string]any{"label": "password=" + strings.Repeat("p", 20)}}},
		map[string]any{secret: 1},
		map[string]any{"a": []any{[]any{"x", "\t" + secret + "\u2028"}}},
		map[string]any{"err": "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n-----END RSA PRIVATE KEY-----"},
	} {
		res, err := d.redactResult(v)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), "MIIEsecret") || strings.Contains(string(b), "pppppppppppppppppppp") {
			t.Errorf("%v: came out %s", v, b)
		}
	}
	clean := map[string]any{"sessionKey": "agent:main:main", "n": 3, "text": "nothing here \"quoted\" \u00e9"}
	res, err := d.redactResult(clean)
	if _, raw := res.(json.RawMessage); err != nil || !raw {
		t.Fatalf("a clean reply was rebuilt: %T %v", res, err)
	}
	if got := jsonStrings([]byte(`{"a\"b":"x\\y\u00e9\n","c":[1,"d"]}`)); got != "a\"b\nx\\yé\n\nc\nd\n" {
		t.Fatalf("jsonStrings: %q", got)
	}
}
