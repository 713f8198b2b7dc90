package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
)

const (
	defaultExecTimeout = 60 * time.Second
	// stderrTail is how much of stderr a run error quotes: enough for a stack
	// trace's last frames, small enough for a run record.
	stderrTail = 2 << 10
	// maxExecStdout bounds what a runaway agent can make the gateway buffer;
	// a reply larger than this would not fit a NATS message anyway.
	maxExecStdout = 8 << 20
	// execWaitDelay bounds how long Wait lingers after the process exits (or
	// is killed) while a straggler still holds stdout or stderr open.
	execWaitDelay = 2 * time.Second
)

// execConfig is agents.list[].exec.
type execConfig struct {
	Command        []string `mapstructure:"command"`
	TimeoutSeconds *int     `mapstructure:"timeoutSeconds"`
	// Env is a mapping or a list of "NAME=value" strings; see parseEnv.
	Env any    `mapstructure:"env"`
	Dir string `mapstructure:"dir"`
	// User runs each turn as this OS user (a name or a numeric uid); the
	// gateway must be root.
	User string `mapstructure:"user"`
	// ReadPaths and WritePaths are directories a confined turn (no user)
	// may also read, or read and write, besides its own (see confine).
	ReadPaths  []string `mapstructure:"readPaths"`
	WritePaths []string `mapstructure:"writePaths"`
}

type execRuntime struct {
	argv    []string
	dir     string
	env     []string // appended to the filtered gateway environment
	timeout time.Duration
	label   string // for messages: the command as configured
	as      *runAs // exec.user; nil: the gateway's own user
	// confined: without exec.user, each turn starts through the launcher
	// (self), which confines it with Landlock to the system directories,
	// its own directories and readPaths/writePaths
	confined              bool
	self                  string
	readPaths, writePaths []string
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func newExec(key string, raw map[string]any) (*execRuntime, error) {
	var c execConfig
	if err := decodeSection(key, raw, &c); err != nil {
		return nil, err
	}
	if len(c.Command) == 0 || strings.TrimSpace(c.Command[0]) == "" {
		return nil, fmt.Errorf(`%s.command: required, the program and its arguments as a list, e.g. ["./my-agent", "--flag"]`, key)
	}
	r := &execRuntime{argv: c.Command, dir: c.Dir, timeout: defaultExecTimeout, label: quoteShort(c.Command[0])}
	if c.TimeoutSeconds != nil {
		if *c.TimeoutSeconds < 1 {
			return nil, fmt.Errorf("%s.timeoutSeconds: must be 1 or more, got %d", key, *c.TimeoutSeconds)
		}
		r.timeout = time.Duration(*c.TimeoutSeconds) * time.Second
	}
	if c.Dir != "" {
		st, err := os.Stat(c.Dir)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s.dir: %v", key, err)
		case !st.IsDir():
			return nil, fmt.Errorf("%s.dir: %s is not a directory", key, quoteShort(c.Dir))
		}
	}
	prog, err := checkProgram(c.Command[0], c.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s.command[0]: %v", key, err)
	}
	// a turn runs in a directory of its own unless dir is set, so a
	// relative program path is resolved now, against dir or the
	// gateway's working directory, as it was written
	r.argv = append([]string{prog}, c.Command[1:]...)
	if r.env, err = parseEnv(key+".env", c.Env); err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.User) != "" {
		if r.as, err = lookupRunAs(key+".user", c.User); err != nil {
			return nil, err
		}
	}
	if err := r.setConfinement(key, c); err != nil {
		return nil, err
	}
	return r, nil
}

// checkProgram fails at startup on a program that cannot run, instead of on
// every turn, and returns the path to run: a path with a slash is taken
// relative to dir (or the working directory), as exec.Cmd would, and made
// absolute; a bare name is looked up in PATH when the turn runs.
func checkProgram(prog, dir string) (string, error) {
	if !strings.ContainsRune(prog, os.PathSeparator) {
		if _, err := exec.LookPath(prog); err != nil {
			return "", fmt.Errorf("%s not found in PATH", quoteShort(prog))
		}
		return prog, nil
	}
	path := prog
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %v", quoteShort(prog), errors.Unwrap(err))
	case st.IsDir():
		return "", fmt.Errorf("%s is a directory", quoteShort(prog))
	case st.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not executable (chmod +x it)", quoteShort(prog))
	}
	return filepath.Abs(path)
}

// parseEnv accepts a mapping or a list of "NAME=value". Viper folds mapping
// keys to lower case, so mapping names are upper-cased (MY_VAR survives as
// MY_VAR, not my_var); the list form keeps a name exactly as written.
func parseEnv(key string, v any) ([]string, error) {
	var out []string
	add := func(k, name, value string) error {
		if !envNameRe.MatchString(name) {
			return fmt.Errorf("%s: %s is not an environment variable name (letters, digits and _, not starting with a digit)", k, quoteShort(name))
		}
		out = append(out, name+"="+value)
		return nil
	}
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			value, ok := scalarString(v[name])
			if !ok {
				return nil, fmt.Errorf("%s.%s: must be a string, got %s", key, name, describeValue(v[name]))
			}
			if err := add(key+"."+name, strings.ToUpper(name), value); err != nil {
				return nil, err
			}
		}
	case map[string]string:
		m := make(map[string]any, len(v))
		for name, value := range v {
			m[name] = value
		}
		return parseEnv(key, m)
	case []any:
		for i, x := range v {
			k := fmt.Sprintf("%s[%d]", key, i)
			s, ok := x.(string)
			name, value, found := strings.Cut(s, "=")
			if ok && !found && envNameRe.MatchString(s) {
				out = append(out, s) // NAME alone: the gateway's value, at each turn (childEnv)
				continue
			}
			if !ok || !found {
				return nil, fmt.Errorf(`%s: must be a "NAME=value" string, or a "NAME" to pass on the gateway's own value, got %s`, k, describeValue(x))
			}
			if err := add(k, name, value); err != nil {
				return nil, err
			}
		}
	case []string:
		l := make([]any, len(v))
		for i, s := range v {
			l[i] = s
		}
		return parseEnv(key, l)
	default:
		return nil, fmt.Errorf(`%s: must be a mapping {NAME: value} or a list of "NAME=value", got %s`, key, describeValue(v))
	}
	return out, nil
}

func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case int, int64, float64, bool, uint64, int32:
		return fmt.Sprint(v), true
	}
	return "", false
}

// execInput is the JSON an exec agent reads on stdin.
type execInput struct {
	SessionKey        string            `json:"sessionKey"`
	AgentID           string            `json:"agentId"`
	RunID             string            `json:"runId"`
	Message           string            `json:"message"`
	Prompt            string            `json:"prompt"`
	ExtraSystemPrompt string            `json:"extraSystemPrompt"`
	Messages          []json.RawMessage `json:"messages"`
	NATSURL           string            `json:"natsUrl"`
	Token             string            `json:"token"`
	ToolsSubject      string            `json:"toolsSubject"`
	// the run's own NATS user, on a server with NATS auth
	NATSCreds string `json:"natsCreds,omitempty"`
	NATSInbox string `json:"natsInbox,omitempty"`
}

// execOutput is the one JSON object an exec agent writes on stdout.
type execOutput struct {
	Reply     *string    `json:"reply"`
	Error     string     `json:"error"`
	ToolCalls []ToolCall `json:"toolCalls"`
}

// Run starts one process for the turn. The process runs in its own process
// group, so a timeout kills whatever it started too, not just the leader.
func (r *execRuntime) Run(ctx context.Context, t Turn, _ Tools) (*Result, error) {
	runCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	deadline, _ := runCtx.Deadline()
	x, err := r.prepare(t, deadline)
	if err != nil {
		return nil, err
	}
	defer x.cleanup()
	res, err := r.run(ctx, runCtx, t, x)
	var re *RunError
	if errors.As(err, &re) && re.Message != "" {
		// Run errors travel far (run records, a sender's sessions_send
		// result); an agent that prints its stdin or credentials must not
		// leak its token or NATS seed, which would let another session act
		// as this one until they expire.
		re.Message = scrubAll(re.Message, x.secrets)
	}
	return res, err
}

// run runs the turn's process until it exits or runCtx ends; ctx is the
// run's own context (a kill or a shutdown), runCtx adds exec.timeoutSeconds.
func (r *execRuntime) run(ctx, runCtx context.Context, t Turn, x *execTurn) (*Result, error) {
	in := execInput{
		SessionKey: t.SessionKey, AgentID: t.AgentID, RunID: t.RunID,
		Message: t.Message, Prompt: t.Prompt, ExtraSystemPrompt: t.ExtraSystemPrompt,
		Messages: t.History, NATSURL: t.NATSURL, Token: t.Token, ToolsSubject: t.ToolsSubject,
		NATSCreds: x.creds, NATSInbox: x.inbox,
	}
	if in.Messages == nil {
		in.Messages = []json.RawMessage{}
	}
	if in.ToolsSubject == "" {
		in.ToolsSubject = bus.NewNames("").ToolsGroup()
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		return nil, runErrorf("exec %s: encoding the turn: %v (a history message is not valid JSON)", r.label, err)
	}

	cmd, err := r.command(runCtx, x)
	if err != nil {
		return nil, err
	}
	cmd.Dir = x.dir
	cmd.Stdin = bytes.NewReader(stdin)
	stdout := &capWriter{max: maxExecStdout}
	// The extra bytes make sure a secret overlapping the quoted tail is
	// whole in the buffer, so scrubbing can find it.
	stderr := &tailWriter{max: stderrTail + longest(x.secrets), secrets: x.secrets}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	ownGroup(cmd)
	r.as.apply(cmd)
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = execWaitDelay

	err = cmd.Run()
	if cmd.Process != nil {
		// Reap what the turn left behind in its group (a backgrounded helper):
		// one process per turn means nothing outlives it.
		_ = killGroup(cmd)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("exec %s: %w", r.label, ctx.Err())
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		// ErrWaitDelay alone means it exited 0 but a child held the pipes
		// open: the leader wrote its reply before exiting, so carry on.
		var ee *exec.ExitError
		switch {
		case errors.Is(runCtx.Err(), context.DeadlineExceeded):
			return nil, &RunError{Timeout: true, Message: fmt.Sprintf(
				"exec %s: timed out after %s (exec.timeoutSeconds); process group killed%s",
				r.label, r.timeout, stderr.suffix())}
		case errors.As(err, &ee):
			return nil, runErrorf("exec %s: %s%s", r.label, ee.ProcessState, stderr.suffix())
		default:
			return nil, runErrorf("exec %s: %v%s", r.label, err, stderr.suffix())
		}
	}
	if stdout.overflow {
		return nil, runErrorf("exec %s: stdout exceeded %d MiB; write one JSON object {\"reply\": \"...\"}%s", r.label, maxExecStdout>>20, stderr.suffix())
	}
	out, perr := parseExecOutput(stdout.buf.Bytes(), x.secrets)
	if perr != nil {
		return nil, runErrorf("exec %s: exit status 0 but %v%s", r.label, perr, stderr.suffix())
	}
	res := &Result{ToolCalls: out.ToolCalls}
	if out.Error != "" {
		return res, &RunError{Message: out.Error}
	}
	res.Reply = *out.Reply
	return res, nil
}

func parseExecOutput(b []byte, secrets []string) (*execOutput, error) {
	want := `want one JSON object {"reply": "..."}`
	began := func() string { return quoteShort(scrubAll(string(b), secrets)) }
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("stdout was empty; " + want)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var out execOutput
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("stdout is not valid reply JSON (%v); %s; stdout began %s", err, want, began())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("stdout has data after the reply object; %s; stdout began %s", want, began())
	}
	if out.Reply == nil && out.Error == "" {
		return nil, fmt.Errorf("stdout object has no \"reply\" (use \"\" for an empty reply); %s; stdout began %s", want, began())
	}
	for i, c := range out.ToolCalls {
		if c.Name == "" {
			return nil, fmt.Errorf("stdout toolCalls[%d] has no \"name\"", i)
		}
	}
	return &out, nil
}

// inheritedEnv are the only variables a turn's process takes from the
// gateway's environment: what programs need to find each other and to
// format text. Everything else (API keys, SESSIONBUS_CREDS, cloud
// credentials) stays with the gateway; exec.env passes on what an agent
// needs, by value or by name.
var inheritedEnv = []string{"PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL", "TERM",
	// Windows needs these to start most programs
	"SYSTEMROOT", "SystemRoot", "COMSPEC", "PATHEXT", "WINDIR"}

// childEnv is a turn's environment: inheritedEnv and LC_* from the
// gateway's, HOME and TMPDIR set to the turn's own directory when it has
// one, USER, LOGNAME and (without its own directory) HOME of exec.user
// when set, then exec.env (an entry without "=" passes on the gateway's
// value of that name, when it has one). A later entry of a name wins.
func childEnv(home string, as *runAs, extra []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(inheritedEnv, name) || strings.HasPrefix(name, "LC_") {
			out = append(out, kv)
		}
	}
	switch h, ok := os.LookupEnv("HOME"); {
	case home != "":
		out = append(out, "HOME="+home, "TMPDIR="+home)
	case as != nil:
		out = append(out, "HOME="+as.home)
	case ok:
		out = append(out, "HOME="+h)
	}
	if as != nil {
		out = append(out, "USER="+as.name, "LOGNAME="+as.name)
	}
	for _, kv := range extra {
		if strings.Contains(kv, "=") {
			out = append(out, kv)
		} else if v, ok := os.LookupEnv(kv); ok {
			out = append(out, kv+"="+v)
		}
	}
	return out
}

// capWriter keeps up to max bytes and then swallows the rest, so a chatty
// process is not blocked on a full pipe (it would hang until the timeout).
type capWriter struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room < len(p) {
		w.overflow = true
		if room > 0 {
			w.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return w.buf.Write(p)
}

// tailWriter keeps the last max bytes written.
type tailWriter struct {
	buf     []byte
	max     int
	dropped bool
	secrets []string // scrubbed from the rendered tail
}

func (w *tailWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= w.max {
		w.dropped = w.dropped || len(w.buf) > 0 || len(p) > w.max
		w.buf = append(w.buf[:0], p[len(p)-w.max:]...)
		return n, nil
	}
	if over := len(w.buf) + len(p) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
		w.dropped = true
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

// suffix renders the last stderrTail bytes for a run error, "" when stderr
// was silent.
func (w *tailWriter) suffix() string {
	b := []byte(scrubAll(string(w.buf), w.secrets))
	dropped := w.dropped
	if len(b) > stderrTail {
		b, dropped = b[len(b)-stderrTail:], true
	}
	s := strings.ToValidUTF8(string(bytes.TrimSpace(b)), "\uFFFD")
	switch {
	case s == "":
		return ""
	case dropped:
		return "; stderr (last 2 KiB): ..." + s
	}
	return "; stderr: " + s
}
