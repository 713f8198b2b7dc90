package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docFiles are the README, docs/*.md and the dated notes of docs/notes/
// (a note is a record, but a reader copies its commands all the same).
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	notes, err := filepath.Glob("../../docs/notes/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 || len(notes) == 0 {
		t.Fatalf("no docs found (%d pages, %d notes): run from cmd/sessionbus", len(paths), len(notes))
	}
	paths = append(paths, notes...)
	docs := map[string]string{}
	for _, p := range append(paths, "../../README.md") {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[strings.TrimPrefix(p, "../../")] = string(b)
	}
	return docs
}

// natsCLIVersion is the stock nats CLI's version go.mod pins (go tool nats).
func natsCLIVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+github\.com/nats-io/natscli (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod does not require github.com/nats-io/natscli")
	}
	return string(m[1])
}

// readmeSetUp is the README's first set-up command.
const readmeSetUp = "go run ./cmd/sessionbus serve --demo"

// substitution is a shell command substitution, $(...), inside a line:
// the flags in it are its own command's.
var substitution = regexp.MustCompile(`\$\([^)]*\)`)

// TestDocsCommandsRunWithTheInstalledBinary: the README's and docs' code
// blocks write sessionbus commands for the installed binary (go install
// ./cmd/sessionbus), never `go run ./cmd/sessionbus`, which works only
// from the clone's root;
// every sessionbus command line in their code blocks names a command and
// flags the binary has; and the stock nats CLI is installed at the version
// go.mod pins (go tool nats runs the same one).
func TestDocsCommandsRunWithTheInstalledBinary(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// the README starts with its two set-up commands, which need only Go
	if _, rest, ok := strings.Cut(string(readme), "```sh\n"); !ok || !strings.HasPrefix(rest, readmeSetUp+"\ngo test ./...\n```") {
		t.Errorf("README.md's first code block is not the set-up %q then %q", readmeSetUp, "go test ./...")
	}
	flagsOf := map[string][]string{}
	for _, c := range shellCommands() {
		flagsOf[c.name] = flagWords(c)
	}
	natsAt := regexp.MustCompile(`natscli/nats@(\S+?)[` + "`" + `)\s]`)
	want := natsCLIVersion(t)
	goRun := regexp.MustCompile(`go run \S*cmd/sessionbus`)
	cmdLine := regexp.MustCompile(`^(?:\$ )?sessionbus ([a-z]+)(.*)$`)
	for name, text := range docFiles(t) {
		for _, m := range natsAt.FindAllStringSubmatch(text, -1) {
			if m[1] != want {
				t.Errorf("%s installs natscli/nats@%s: use @%s, the version go.mod pins (go tool nats)", name, m[1], want)
			}
		}
		in := false
		for line := range strings.SplitSeq(text, "\n") {
			if strings.HasPrefix(line, "```") {
				in = !in && (line == "```sh" || line == "```console" || line == "```")
				continue
			}
			// the README's set-up, which needs only Go, is the one go run
			if in && goRun.MatchString(line) && !(name == "README.md" && line == readmeSetUp) {
				t.Errorf("%s: %q: write `sessionbus` (installed with go install ./cmd/sessionbus): go run works only from the clone's root", name, line)
			}
			if !in {
				continue
			}
			// a sessionbus command inside $(...) runs as written too
			for _, sub := range inner.FindAllStringSubmatch(line, -1) {
				checkDocCommand(t, name, line, flagsOf, sub[1], sub[2])
			}
			m := cmdLine.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			rest, _, _ := strings.Cut(m[2], "#")
			checkDocCommand(t, name, line, flagsOf, m[1], substitution.ReplaceAllString(rest, ""))
		}
	}
}

// inner is a sessionbus command inside $(...).
var inner = regexp.MustCompile(`\$\(sessionbus ([a-z]+)([^)$]*)\)`)

// checkDocCommand checks one documented sessionbus command: cmd is a
// command, and each --flag in rest is one of its flags.
func checkDocCommand(t *testing.T, doc, line string, flagsOf map[string][]string, cmd, rest string) {
	t.Helper()
	flags, ok := flagsOf[cmd]
	if !ok {
		t.Errorf("%s: %q runs sessionbus %s, which is no command", doc, line, cmd)
		return
	}
	for _, w := range strings.Fields(rest) {
		w, _, _ = strings.Cut(w, "=")
		if strings.HasPrefix(w, "--") && len(w) > 2 && !slices.Contains(flags, w) {
			t.Errorf("%s: %q passes %s, which sessionbus %s does not have", doc, line, w, cmd)
		}
	}
}
