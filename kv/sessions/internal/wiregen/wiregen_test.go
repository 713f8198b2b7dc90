package wiregen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A field stored in one form but not the other, or with another type,
// stops the generator with its name.
func TestGenerateRefusesMismatches(t *testing.T) {
	const head = "package sessions\n\ntype RareFields struct{ Goal string }\n\n"
	for _, c := range []struct{ src, want string }{
		{`type Entry struct{ Key string; Rare *RareFields ` + "`json:\"-\"`" + `; Lost int }
type entryJSON struct{ Key string; Goal string }`, "Lost"},
		{`type Entry struct{ Key string; Rare *RareFields ` + "`json:\"-\"`" + ` }
type entryJSON struct{ Key int64; Goal string }`, "entryJSON.Key"},
		{`type Entry struct{ Key string; Rare *RareFields ` + "`json:\"-\"`" + ` }
type entryJSON struct{ Key string }`, "Goal"},
		{`type Entry struct{ Key string; Goal string; Rare *RareFields ` + "`json:\"-\"`" + ` }
type entryJSON struct{ Key string; Goal string }`, "both"},
	} {
		path := filepath.Join(t.TempDir(), "entry.go")
		if err := os.WriteFile(path, []byte(head+c.src+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Generate(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\ngave %v, want an error naming %s", c.src, err, c.want)
		}
	}
}

// A stored name the plain decoder could not match as encoding/json does
// (an option that changes the decoding, two names equal but for case)
// stops the generator too.
func TestGenerateRefusesUndecodableNames(t *testing.T) {
	const head = "package sessions\n\ntype RareFields struct{ Goal string }\n\n"
	for _, c := range []struct{ src, want string }{
		{`type Entry struct{ Key int64; Rare *RareFields ` + "`json:\"-\"`" + ` }
type entryJSON struct{ Key int64 ` + "`json:\"key,string\"`" + `; Goal string }`, "Key"},
		{`type Entry struct{ Key string; KEY string; Rare *RareFields ` + "`json:\"-\"`" + ` }
type entryJSON struct{ Key string; KEY string; Goal string }`, "case"},
	} {
		path := filepath.Join(t.TempDir(), "entry.go")
		if err := os.WriteFile(path, []byte(head+c.src+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Generate(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\ngave %v, want an error naming %s", c.src, err, c.want)
		}
	}
}
