package config

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/viper"
)

// records keeps the log records at warn and above.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// TestExampleLoadsAsTheDefaults: the example loads with no warning and
// configures exactly what no file does.
func TestExampleLoadsAsTheDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), ExampleFile)
	if err := os.WriteFile(path, Example(), 0o600); err != nil {
		t.Fatal(err)
	}
	warnings := &records{}
	c, err := Load(path, slog.New(warnings))
	if err != nil {
		t.Fatalf("the example does not load: %v\n%s", err, Example())
	}
	if len(warnings.msgs) > 0 {
		t.Errorf("loading the example warned: %q", warnings.msgs)
	}
	if want := Default(); !reflect.DeepEqual(c, want) {
		t.Errorf("the example configures something else than the defaults:\n got %+v\nwant %+v", c, want)
	}
}

// TestExampleNamesEveryKey: every key the loader has a default for is set
// in the example, and every key of the Config struct is in it.
func TestExampleNamesEveryKey(t *testing.T) {
	keys, members := ExampleKeys()
	set := map[string]bool{}
	all := map[string]bool{}
	for _, k := range keys {
		all[k.Key] = true
		if k.Set {
			set[k.Key] = true
		}
	}
	for k := range defaults {
		if !set[k] {
			t.Errorf("the loader's default %s is not set in the example (no such field in Config?)", k)
		}
	}
	for _, m := range members {
		all[m] = true
	}
	text := string(Example())
	for k := range all {
		name := k[strings.LastIndex(k, ".")+1:]
		if !strings.Contains(text, strings.TrimSuffix(name, "[]")+":") {
			t.Errorf("key %s is not written in the example", k)
		}
	}
}

// TestExampleCommentedBlocksAreYAML: removing every "# " of the body
// gives YAML with every key of the commented sections where it belongs.
func TestExampleCommentedBlocksAreYAML(t *testing.T) {
	_, body, _ := strings.Cut(string(Example()), "\n\n")
	uncommented := regexp.MustCompile(`(?m)^(\s*)# `).ReplaceAllString(body, "$1")
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(strings.NewReader(uncommented)); err != nil {
		t.Fatalf("uncommented example: %v\n%s", err, uncommented)
	}
	for _, k := range []string{"session.sendPolicy.default", "tools.subagents.tools.deny", "agents.defaults.models", "agents.defaults.subagents.requireAgentId"} {
		if !v.IsSet(k) {
			t.Errorf("uncommented, the example does not set %s:\n%s", k, uncommented)
		}
	}
	list, _ := v.Get("agents.list").([]any)
	if len(list) != 1 {
		t.Fatalf("uncommented agents.list: %#v", v.Get("agents.list"))
	}
	item, _ := list[0].(map[string]any)
	if item["id"] != "main" || item["tools"] == nil || item["subagents"] == nil {
		t.Errorf("uncommented agents.list item: %#v", item)
	}
}

// docsKeys reads the key column of docs/config.md's table, with each key's
// default cell.
func docsKeys(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]*) \\|")
	keys := map[string]string{}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if m := row.FindSubmatch(line); m != nil {
			keys[string(m[1])] = strings.TrimSpace(string(m[2]))
		}
	}
	if len(keys) < 20 {
		t.Fatalf("docs/config.md: only %d keys in its table", len(keys))
	}
	return keys
}

// TestDocsListTheExampleKeys: docs/config.md and the example name the same
// keys with the same defaults, so neither can drift from the loader: every
// key of the example has a row, every row's key is in the example (a key
// under a commented section, such as agents.list[].tools.deny, is one of
// that section's keys), and the row's default is the example's.
func TestDocsListTheExampleKeys(t *testing.T) {
	docs := docsKeys(t)
	keys, members := ExampleKeys()
	inExample := map[string]bool{}
	for _, k := range keys {
		inExample[k.Key] = true
		cell, ok := docs[k.Key]
		switch {
		case !ok:
			t.Errorf("docs/config.md has no row for %s (default %s)", k.Key, k.Default)
		case !k.Section && !strings.Contains(cell, "`"+k.Default+"`"):
			t.Errorf("docs/config.md gives %s the default %s; the loader's is `%s`", k.Key, cell, k.Default)
		}
	}
	for _, m := range members {
		inExample[m] = true
	}
	for k := range docs {
		// a key inside a free-form map member (agents.list[].exec.user
		// inside agents.list[].exec) is that member's
		if !inExample[k] && !slices.ContainsFunc(members, func(m string) bool { return strings.HasPrefix(k, m+".") }) {
			t.Errorf("docs/config.md documents %s, which the loader does not read (not in the example)", k)
		}
	}
}
