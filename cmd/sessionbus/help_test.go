package main

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// usageCommands are the commands the top-level usage lists.
func usageCommands(t *testing.T) []string {
	t.Helper()
	var cmds []string
	for line := range strings.SplitSeq(usage, "\n") {
		if m := usageLine.FindStringSubmatch(line); m != nil {
			cmds = append(cmds, m[1])
		}
	}
	if len(cmds) < 15 {
		t.Fatalf("the usage lists %d commands: %v", len(cmds), cmds)
	}
	return cmds
}

// TestEveryCommandHelpTeaches: each command's -h says how to call it, what
// it is for and how to use it (examples) above its flags, and each
// example's flags are flags the command has.
func TestEveryCommandHelpTeaches(t *testing.T) {
	cmds := usageCommands(t)
	flagsOf := map[string][]string{}
	for _, c := range shellCommands() {
		flagsOf[c.name] = flagWords(c)
	}
	for _, name := range cmds {
		var out, errb bytes.Buffer
		run([]string{name, "-h"}, strings.NewReader(""), &out, &errb)
		text := out.String() + errb.String()
		h, ok := helps[name]
		if !ok {
			t.Errorf("%s has no help entry (help.go)", name)
			continue
		}
		if h.purpose == "" || strings.Contains(h.purpose, "\n") || len(h.examples) < 1 || len(h.examples) > 3 {
			t.Errorf("%s: help wants a one-line purpose and 1-3 examples: %+v", name, h)
		}
		usageAt := strings.Index(text, "usage: sessionbus "+name)
		examplesAt := strings.Index(text, "\nexamples:\n")
		if usageAt < 0 || !strings.Contains(text, h.purpose) || examplesAt < 0 {
			t.Errorf("%s -h lacks its usage, purpose or examples:\n%s", name, text)
		}
		if flagsAt := strings.Index(text, "\nflags:\n"); len(flagsOf[name]) > 0 && (flagsAt < examplesAt || !strings.Contains(text[flagsAt:], "\n  -")) {
			t.Errorf("%s -h does not list its flags below the examples:\n%s", name, text)
		}
		for _, e := range h.examples {
			if !strings.Contains(e, "sessionbus "+name) {
				t.Errorf("%s: example %q does not run the command", name, e)
			}
			_, rest, _ := strings.Cut(e, "sessionbus "+name)
			rest, _, _ = strings.Cut(rest, "&&")
			rest = substitution.ReplaceAllString(rest, "") // $(sessionbus home ...) is another command's
			for _, w := range strings.Fields(rest) {
				if strings.HasPrefix(w, "--") && !slices.Contains(flagsOf[name], w) {
					t.Errorf("%s: example %q passes %s, which %s does not have", name, e, w, name)
				}
			}
		}
	}
	for name := range helps {
		if !slices.Contains(cmds, name) {
			t.Errorf("help for %s, which the usage does not list", name)
		}
	}
	// session has subcommands; its -h still lists the flags they take
	var out bytes.Buffer
	if code := run([]string{"session", "-h"}, strings.NewReader(""), &out, &out); code != 0 || !strings.Contains(out.String(), "-server") || !strings.Contains(out.String(), "-timeout") {
		t.Errorf("session -h: exit %d, no flags listed:\n%s", code, out.String())
	}
}

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{"completion", shell}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("completion %s: exit %d: %s", shell, code, errb.String())
	}
	return out.String()
}

// TestCompletionScripts: bash accepts its script and it completes
// commands, subcommands and flags; the zsh and fish scripts name every
// command; an unknown shell is a usage error.
func TestCompletionScripts(t *testing.T) {
	cmds := usageCommands(t)
	bash := completionScript(t, "bash")
	for _, shell := range []string{"zsh", "fish"} {
		script := completionScript(t, shell)
		for _, c := range cmds {
			if !strings.Contains(script, c) {
				t.Errorf("the %s script does not mention %s", shell, c)
			}
		}
		if !strings.Contains(script, "--demo") && !strings.Contains(script, "-l demo") {
			t.Errorf("the %s script has no serve flags", shell)
		}
		if sh, err := exec.LookPath(shell); err == nil {
			if out, err := exec.Command(sh, "-n", "-c", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n rejects its script: %v\n%s", shell, err, out)
			}
		}
	}
	if code := run([]string{"completion", "tcsh"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
	sh, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to check the bash script with")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, sh, "-n", "-c", bash).CombinedOutput(); err != nil {
		t.Fatalf("bash -n rejects the script: %v\n%s", err, out)
	}
	complete := func(words ...string) string {
		prog := bash + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\nCOMP_CWORD=" + string(rune('0'+len(words)-1)) +
			"\n_sessionbus\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.CommandContext(ctx, sh, "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("completing %v: %v\n%s", words, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"sessionbus", "se"}, "serve session search"},
		{[]string{"sessionbus", "session", "''"}, "delete reset goal compact tools send-policy pin unpin stop queue --actor --clear --creds --instructions --json --prefix --server --timeout --tls-ca --tls-cert --tls-key"},
		{[]string{"sessionbus", "serve", "--de"}, "--demo"},
		{[]string{"sessionbus", "completion", "''"}, "bash zsh fish"},
	} {
		if got := complete(c.words...); got != c.want {
			t.Errorf("completing %v: %q, want %q", c.words, got, c.want)
		}
	}
}
