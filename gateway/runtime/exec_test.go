package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/config"
)

// writeScript puts an executable bash script into dir and returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func execAgent(command []any, extra map[string]any) config.Agent {
	m := map[string]any{"command": command}
	for k, v := range extra {
		m[k] = v
	}
	return config.Agent{ID: "ops", Runtime: "exec", Exec: m}
}

func TestExecEchoesTurnAndParsesReply(t *testing.T) {
	dir := t.TempDir()
	stdinCopy := filepath.Join(dir, "stdin.json")
	script := writeScript(t, dir, "agent.sh", `
cat > "$STDIN_COPY"
printf '%s' '{"reply": "hello from exec", "toolCalls": [{"name": "sessions_list", "params": {"limit": 1}, "result": {"count": 0}}]}'
`)
	rt := mustNew(t, execAgent([]any{script}, map[string]any{"env": map[string]any{"stdin_copy": stdinCopy}, "writePaths": []any{dir}}))
	turn := Turn{
		SessionKey: "agent:ops:main", AgentID: "ops", RunID: "run-1",
		Message: "do it", Prompt: "[from b]\ndo it", ExtraSystemPrompt: "Agent-to-agent message context:\nx",
		History: []json.RawMessage{json.RawMessage(`{"role":"user","content":"earlier"}`)},
		NATSURL: "nats://127.0.0.1:4222", Token: "tok", ToolsSubject: "sb.tools",
	}
	res, err := rt.Run(context.Background(), turn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "hello from exec" || len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "sessions_list" {
		t.Fatalf("got %+v", res)
	}
	jsonEqual(t, res.ToolCalls[0].Params, `{"limit":1}`)
	jsonEqual(t, res.ToolCalls[0].Result, `{"count":0}`)
	in, err := os.ReadFile(stdinCopy)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, in, `{"sessionKey":"agent:ops:main","agentId":"ops","runId":"run-1","message":"do it",
		"prompt":"[from b]\ndo it","extraSystemPrompt":"Agent-to-agent message context:\nx",
		"messages":[{"role":"user","content":"earlier"}],"natsUrl":"nats://127.0.0.1:4222","token":"tok","toolsSubject":"sb.tools"}`)
}

func TestExecDefaultsOnStdin(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "agent.sh", `
in=$(cat)
case "$in" in *'"messages":[]'*'"toolsSubject":"sb.tools"'*) printf '{"reply":"list"}' ;; *) printf '{"reply":"not a list or no default subject"}' ;; esac
`)
	res, err := mustNew(t, execAgent([]any{script}, nil)).Run(context.Background(), Turn{}, nil)
	if err != nil || res.Reply != "list" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestExecArgsEnvDir(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	writeScript(t, work, "agent.sh", `
cat >/dev/null
printf '{"reply":"%s|%s|%s|%s|%s"}' "$1" "$MY_VAR" "$Mixed_Case" "${SESSIONBUS_CREDS:-unset}" "$(basename "$PWD")"
`)
	t.Setenv("SESSIONBUS_CREDS", filepath.Join(dir, "operator.creds"))
	// "my_var" is how viper hands over MY_VAR; the list form keeps case.
	rt := mustNew(t, execAgent([]any{"./agent.sh", "arg one"}, map[string]any{
		"dir": work,
		"env": map[string]any{"my_var": "x"},
	}))
	res, err := rt.Run(context.Background(), Turn{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "arg one|x||unset|" + filepath.Base(work); res.Reply != want {
		t.Fatalf("got %q, want %q", res.Reply, want)
	}
	rt = mustNew(t, execAgent([]any{"./agent.sh"}, map[string]any{
		"dir": work,
		"env": []any{"Mixed_Case=kept=as-is", "SESSIONBUS_CREDS=explicit"},
	}))
	res, err = rt.Run(context.Background(), Turn{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "||kept=as-is|explicit|" + filepath.Base(work); res.Reply != want {
		t.Fatalf("got %q, want %q", res.Reply, want)
	}
}

// Without dir, a turn runs in a directory of its own (not the gateway's
// working directory, which holds the data dir), removed after the turn, and
// its environment is the allow-list plus exec.env: a secret in the
// gateway's environment reaches it only when exec.env names it.
func TestExecOwnDirAndEnv(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	writeScript(t, work, "agent.sh", `
cat >/dev/null
printf '{"reply":"%s|%s|%s|%s|%s"}' "$PWD" "${OPENAI_API_KEY:-unset}" "${PASSED:-unset}" "$HOME" "${PATH:+path}"
`)
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("PASSED", "by-name")
	rt := mustNew(t, execAgent([]any{"./agent.sh"}, map[string]any{"env": []any{"PASSED", "NOT_SET_ANYWHERE"}}))
	res, err := rt.Run(context.Background(), Turn{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(res.Reply, "|")
	if len(parts) != 5 {
		t.Fatalf("reply %q", res.Reply)
	}
	pwd, key, passed, home, path := parts[0], parts[1], parts[2], parts[3], parts[4]
	if !strings.HasPrefix(filepath.Base(pwd), "sessionbus-run-") || strings.HasPrefix(pwd, work) {
		t.Fatalf("turn ran in %q, want a directory of its own outside %s", pwd, work)
	}
	if key != "unset" || passed != "by-name" || home != pwd || path != "path" {
		t.Fatalf("turn environment: key %q, passed %q, home %q (dir %q), path %q", key, passed, home, pwd, path)
	}
	if _, err := os.Stat(pwd); !os.IsNotExist(err) {
		t.Fatalf("the turn's directory is still there: %v", err)
	}
}

func TestExecBadJSON(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"not json":      `echo "hello, not json"; echo "some diagnostics" >&2`,
		"no reply":      `echo '{"text":"hi"}'`,
		"two objects":   `echo '{"reply":"a"}{"reply":"b"}'`,
		"empty stdout":  `true`,
		"reply not str": `echo '{"reply": 42}'`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			script := writeScript(t, dir, strings.ReplaceAll(name, " ", "_")+".sh", "cat >/dev/null\n"+body+"\n")
			res, err := mustNew(t, execAgent([]any{script}, nil)).Run(context.Background(), Turn{}, nil)
			if res != nil {
				t.Fatalf("got a result %+v", res)
			}
			re := asRunError(t, err)
			wantErrContains(t, re, "exit status 0", `{"reply"`)
			if name == "not json" {
				wantErrContains(t, re, `stdout began "hello, not json`, "stderr: some diagnostics")
			}
			t.Log(re)
		})
	}
}

func TestExecEmptyReplyAndExplicitError(t *testing.T) {
	dir := t.TempDir()
	empty := writeScript(t, dir, "empty.sh", `printf '{"reply":""}'`)
	res, err := mustNew(t, execAgent([]any{empty}, nil)).Run(context.Background(), Turn{}, nil)
	if err != nil || res.Reply != "" {
		t.Fatalf("got %+v, %v", res, err)
	}
	refuse := writeScript(t, dir, "refuse.sh", `printf '{"error":"agent refused"}'`)
	_, err = mustNew(t, execAgent([]any{refuse}, nil)).Run(context.Background(), Turn{}, nil)
	if re := asRunError(t, err); re.Message != "agent refused" {
		t.Fatalf("got %q", re.Message)
	}
}

func TestExecNonZeroExitQuotesStderrTail(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "fail.sh", `
cat >/dev/null
echo "traceback: line 1" >&2
echo "ValueError: boom" >&2
echo '{"reply":"ignored"}'
exit 3
`)
	_, err := mustNew(t, execAgent([]any{script}, nil)).Run(context.Background(), Turn{}, nil)
	re := asRunError(t, err)
	wantErrContains(t, re, "exit status 3", "ValueError: boom", "traceback: line 1", filepath.Base(script))
	if errors.Is(err, ErrTimeout) {
		t.Fatal("an exit is not a timeout")
	}

	// Only the last ~2 KiB of a long stderr is quoted.
	long := writeScript(t, dir, "long.sh", `
cat >/dev/null
echo "FIRST-LINE" >&2
for i in $(seq 1 400); do echo "noise line $i ........" >&2; done
echo "LAST-LINE" >&2
exit 1
`)
	_, err = mustNew(t, execAgent([]any{long}, nil)).Run(context.Background(), Turn{}, nil)
	wantErrContains(t, err, "exit status 1", "LAST-LINE", "stderr (last 2 KiB): ...")
	if strings.Contains(err.Error(), "FIRST-LINE") || len(err.Error()) > stderrTail+300 {
		t.Fatalf("stderr not cut to its tail (%d bytes)", len(err.Error()))
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := writeScript(t, dir, "slow.sh", `
cat >/dev/null
sleep 300 &
echo $! > "`+pidFile+`"
echo "working..." >&2
wait
`)
	rt := mustNew(t, execAgent([]any{script}, map[string]any{"timeoutSeconds": 1, "writePaths": []any{dir}}))
	res, err := rt.Run(context.Background(), Turn{}, nil)
	if res != nil {
		t.Fatalf("got a result %+v", res)
	}
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	wantErrContains(t, asRunError(t, err), "timed out after 1s", "process group killed", "stderr: working...")
	waitDead(t, pidFile)
}

func TestExecStragglerHoldingStdout(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The background sleep inherits stdout and would keep the pipe open
	// forever; the reply is complete once the leader exits.
	script := writeScript(t, dir, "straggler.sh", `
cat >/dev/null
sleep 300 &
echo $! > "`+pidFile+`"
printf '{"reply":"done early"}'
`)
	res, err := mustNew(t, execAgent([]any{script}, map[string]any{"writePaths": []any{dir}})).Run(context.Background(), Turn{}, nil)
	if err != nil || res.Reply != "done early" {
		t.Fatalf("got %+v, %v", res, err)
	}
	waitDead(t, pidFile)
}

func TestExecCancellation(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "slow.sh", "cat >/dev/null\nsleep 300\n")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := mustNew(t, execAgent([]any{script}, nil)).Run(ctx, Turn{}, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestExecIgnoresUnreadStdin(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "nostdin.sh", `printf '{"reply":"ok"}'`)
	big := strings.Repeat("x", 1<<20) // larger than a pipe buffer
	res, err := mustNew(t, execAgent([]any{script}, nil)).Run(context.Background(), Turn{Prompt: big}, nil)
	if err != nil || res.Reply != "ok" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// waitDead waits until the pid in file no longer exists. It bounds the wait
// generously: this checks that the process dies, not how fast.
func waitDead(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		// A killed orphan is reaped by init; until then it is a zombie, which
		// /proc shows as state Z.
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d of the turn survived it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecConfigErrors(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "ok.sh", "true\n")
	plain := filepath.Join(dir, "plain.sh")
	if err := os.WriteFile(plain, []byte("true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		exec map[string]any
		want string
	}{
		{"missing command", map[string]any{}, `agents.list[ops].exec.command: required, the program and its arguments as a list`},
		{"empty command", map[string]any{"command": []any{}}, `agents.list[ops].exec.command: required`},
		{"command as string", map[string]any{"command": "./my-agent --flag"},
			`agents.list[ops].exec.command: must be a list of strings, got the string "./my-agent --flag"; write it as a list, e.g. ["./my-agent", "--flag"]`},
		{"command not strings", map[string]any{"command": []any{map[string]any{"x": 1}}}, `agents.list[ops].exec.command[0]: must be a string, got a mapping`},
		{"not found", map[string]any{"command": []any{filepath.Join(dir, "missing")}}, `agents.list[ops].exec.command[0]: "` + filepath.Join(dir, "missing") + `": no such file or directory`},
		{"not in PATH", map[string]any{"command": []any{"no-such-agent-binary"}}, `agents.list[ops].exec.command[0]: "no-such-agent-binary" not found in PATH`},
		{"not executable", map[string]any{"command": []any{plain}}, `is not executable (chmod +x it)`},
		{"relative to dir", map[string]any{"command": []any{"./ok.sh"}, "dir": t.TempDir()}, `agents.list[ops].exec.command[0]: "./ok.sh": no such file or directory`},
		{"zero timeout", map[string]any{"command": []any{script}, "timeoutSeconds": 0}, `agents.list[ops].exec.timeoutSeconds: must be 1 or more, got 0`},
		{"timeout string", map[string]any{"command": []any{script}, "timeoutSeconds": "60s"}, `agents.list[ops].exec.timeoutSeconds: must be a whole number, got the string "60s"`},
		{"missing dir", map[string]any{"command": []any{script}, "dir": filepath.Join(dir, "nope")}, `agents.list[ops].exec.dir: stat `},
		{"dir is a file", map[string]any{"command": []any{script}, "dir": script}, `agents.list[ops].exec.dir: "` + script + `" is not a directory`},
		{"bad env name", map[string]any{"command": []any{script}, "env": map[string]any{"my-var": "x"}}, `agents.list[ops].exec.env.my-var: "MY-VAR" is not an environment variable name`},
		{"env value mapping", map[string]any{"command": []any{script}, "env": map[string]any{"x": map[string]any{}}}, `agents.list[ops].exec.env.x: must be a string, got a mapping`},
		{"env list item", map[string]any{"command": []any{script}, "env": []any{"NO EQUALS"}}, `agents.list[ops].exec.env[0]: must be a "NAME=value" string, or a "NAME" to pass on the gateway's own value, got the string "NO EQUALS"`},
		{"env string", map[string]any{"command": []any{script}, "env": "A=b"}, `agents.list[ops].exec.env: must be a mapping {NAME: value} or a list of "NAME=value"`},
		{"unknown key", map[string]any{"command": []any{script}, "timeout": 5}, `agents.list[ops].exec: unknown key(s) timeout (known: command, timeoutSeconds, env, dir, user, readPaths, writePaths)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt, err := New(config.Agent{ID: "ops", Runtime: "exec", Exec: c.exec})
			if rt != nil {
				t.Fatalf("got a runtime with an error")
			}
			wantErrContains(t, err, c.want)
			t.Log(err)
		})
	}
}

// The exec block as a user writes it, through the real loader.
func TestExecThroughConfig(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, dir, "my-agent", "cat >/dev/null\nprintf '{\"reply\":\"%s\"}' \"$GREETING\"\n")
	agents := loadAgents(t, `
agents:
  list:
    - id: ops
      runtime: exec
      exec: {command: ["./my-agent"], timeoutSeconds: 5, dir: "`+dir+`", env: {GREETING: hi}}
`)
	res, err := mustNew(t, agents["ops"]).Run(context.Background(), Turn{}, nil)
	if err != nil || res.Reply != "hi" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestExecErrorsNeverEchoToken(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "leaky.sh", `
in=$(cat)
echo "debug: $in" >&2
echo "not json: $in"
`)
	token := "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.secret-token"
	_, err := mustNew(t, execAgent([]any{script}, nil)).Run(context.Background(), Turn{Token: token}, nil)
	re := asRunError(t, err)
	if strings.Contains(re.Message, token) || !strings.Contains(re.Message, "[redacted]") {
		t.Fatalf("token not scrubbed: %s", re.Message)
	}
}

// A token overlapping the start of the quoted 2 KiB tail must not leak a
// piece of itself either.
func TestExecStderrTailNeverSplitsToken(t *testing.T) {
	dir := t.TempDir()
	token := "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.SIGNATURE-PART"
	for _, after := range []int{2030, 2040, 2047, 2060} {
		script := writeScript(t, dir, fmt.Sprintf("tail%d.sh", after), fmt.Sprintf(`
cat >/dev/null
printf 'noise %%s' "$(head -c 3000 /dev/zero | tr '\0' 'n')" >&2
printf '%%s' "%s" >&2
head -c %d /dev/zero | tr '\0' 'x' >&2
exit 1
`, token, after))
		_, err := mustNew(t, execAgent([]any{script}, nil)).Run(context.Background(), Turn{Token: token}, nil)
		msg := asRunError(t, err).Message
		if strings.Contains(msg, "SIGNATURE") || strings.Contains(msg, "PART") {
			t.Fatalf("after=%d: token piece leaked: ...%s", after, msg[max(0, len(msg)-2100):][:120])
		}
	}
}
