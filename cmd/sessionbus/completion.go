package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// subcommands are the words a command takes as its first argument, which
// completion offers.
var subcommands = map[string][]string{
	"session":    {"delete", "reset", "goal", "compact", "tools", "send-policy", "pin", "unpin", "stop", "queue"},
	"archive":    {"ls", "get", "restore", "budget"},
	"creds":      {"agent", "adapter", "worker", "gateway", "ops", "admin"},
	"completion": {"bash", "zsh", "fish"},
	"adapter":    {"webhook"},
}

// flagsPerSub are the commands whose subcommands have flag sets of their
// own (archive ls has --agent, get has not), read with `CMD SUB -h`. Only
// these: `creds agent -h` would mint credentials, as -h after a
// positional argument is not a flag.
var flagsPerSub = map[string]bool{"session": true, "archive": true, "adapter": true}

// seenFlags records the flag sets commands create while completion asks
// each one for -h: the scripts then list exactly the flags the commands
// parse, with nothing to keep in step by hand.
var seenFlags flagRecorder

type flagRecorder struct {
	mu   sync.Mutex
	on   bool
	sets map[string][]*flag.FlagSet
}

func (r *flagRecorder) note(name string, fs *flag.FlagSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		cmd, _, _ := strings.Cut(name, " ")
		r.sets[cmd] = append(r.sets[cmd], fs)
	}
}

// shellCommand is one command as the completion scripts describe it.
type shellCommand struct {
	name, purpose string
	subs          []string
	flags         []shellFlag
}

type shellFlag struct{ name, usage string }

// usageLine is a command line of the top-level usage: "  name   purpose".
var usageLine = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)\s+(.+)$`)

// shellCommands lists the commands of the top-level usage, in its order,
// each with its subcommands and flags (asked of the command itself).
func shellCommands() []shellCommand {
	var cmds []shellCommand
	for line := range strings.SplitSeq(usage, "\n") {
		if m := usageLine.FindStringSubmatch(line); m != nil {
			cmds = append(cmds, shellCommand{name: m[1], purpose: m[2], subs: subcommands[m[1]]})
		}
	}
	seenFlags.mu.Lock()
	seenFlags.on, seenFlags.sets = true, map[string][]*flag.FlagSet{}
	seenFlags.mu.Unlock()
	defer func() {
		seenFlags.mu.Lock()
		seenFlags.on, seenFlags.sets = false, nil
		seenFlags.mu.Unlock()
	}()
	for _, c := range cmds {
		if c.name == "completion" {
			continue
		}
		// -h stops every command at its flag parsing, before it does anything
		asks := [][]string{{c.name, "-h"}}
		for _, sub := range c.subs {
			if flagsPerSub[c.name] {
				asks = append(asks, []string{c.name, sub, "-h"})
			}
		}
		for _, a := range asks {
			run(a, strings.NewReader(""), io.Discard, io.Discard)
		}
	}
	seenFlags.mu.Lock()
	defer seenFlags.mu.Unlock()
	for i := range cmds {
		seen := map[string]bool{}
		for _, fs := range seenFlags.sets[cmds[i].name] {
			fs.VisitAll(func(f *flag.Flag) {
				// flags kept only for older scripts are not offered
				if !seen[f.Name] && !strings.Contains(f.Usage, "older scripts") {
					seen[f.Name] = true
					cmds[i].flags = append(cmds[i].flags, shellFlag{name: f.Name, usage: firstClause(f.Usage)})
				}
			})
		}
		sort.Slice(cmds[i].flags, func(a, b int) bool { return cmds[i].flags[a].name < cmds[i].flags[b].name })
	}
	return cmds
}

// firstClause is a flag's usage cut for a completion menu.
func firstClause(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if i := strings.IndexAny(s, ";:("); i > 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 70 {
		s = string(r[:67]) + "..."
	}
	return s
}

func cmdCompletion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("completion", stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	shells := map[string]func(io.Writer, []shellCommand){"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}
	if fs.NArg() != 1 || shells[fs.Arg(0)] == nil {
		fs.Usage()
		return 2
	}
	shells[fs.Arg(0)](stdout, shellCommands())
	return 0
}

func names(cmds []shellCommand) string {
	var n []string
	for _, c := range cmds {
		n = append(n, c.name)
	}
	return strings.Join(n, " ")
}

func flagWords(c shellCommand) []string {
	var w []string
	for _, f := range c.flags {
		w = append(w, "--"+f.name)
	}
	return w
}

func bashCompletion(w io.Writer, cmds []shellCommand) {
	fmt.Fprintf(w, `# bash completion for sessionbus: source <(sessionbus completion bash)
_sessionbus() {
    local cur="${COMP_WORDS[COMP_CWORD]}" words=""
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "%s" -- "$cur"))
        return
    fi
    case "${COMP_WORDS[1]}" in
`, names(cmds))
	for _, c := range cmds {
		fmt.Fprintf(w, "        %s) words=%q ;;\n", c.name, strings.Join(append(slices.Clone(c.subs), flagWords(c)...), " "))
	}
	fmt.Fprint(w, `    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _sessionbus sessionbus
`)
}

// zshQuote single-quotes s for zsh.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func zshCompletion(w io.Writer, cmds []shellCommand) {
	fmt.Fprint(w, `#compdef sessionbus
# zsh completion for sessionbus: sessionbus completion zsh > "${fpath[1]}/_sessionbus"
_sessionbus() {
    local -a commands opts
    commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "        %s\n", zshQuote(c.name+":"+c.purpose))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe 'command' commands
        return
    fi
    case $words[2] in
`)
	for _, c := range cmds {
		var ws []string
		for _, s := range append(slices.Clone(c.subs), flagWords(c)...) {
			ws = append(ws, zshQuote(s))
		}
		fmt.Fprintf(w, "        %s) opts=(%s) ;;\n", c.name, strings.Join(ws, " "))
	}
	fmt.Fprint(w, `    esac
    compadd -a opts
    _files
}
if [[ "$funcstack[1]" == "_sessionbus" ]]; then
    _sessionbus "$@"
else
    compdef _sessionbus sessionbus
fi
`)
}

// fishQuote single-quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func fishCompletion(w io.Writer, cmds []shellCommand) {
	fmt.Fprintln(w, "# fish completion for sessionbus: sessionbus completion fish > ~/.config/fish/completions/sessionbus.fish")
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c sessionbus -n __fish_use_subcommand -f -a %s -d %s\n", c.name, fishQuote(c.purpose))
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		if len(c.subs) > 0 {
			fmt.Fprintf(w, "complete -c sessionbus -n %s -f -a %s\n", cond, fishQuote(strings.Join(c.subs, " ")))
		}
		for _, f := range c.flags {
			fmt.Fprintf(w, "complete -c sessionbus -n %s -l %s -d %s\n", cond, f.name, fishQuote(f.usage))
		}
	}
}
