package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/flows/importer/openclawstore"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// import_100k: `sessionbus import --openclaw` of a generated OpenClaw state
// directory (file layout: one sessions.json and one JSONL transcript per
// session) of 100,000 sessions, through the bench client's admin user as
// the CLI connects (with auth unless --insecure). ops_per_sec is sessions
// imported per second of the whole import; p50/p99 are the rate's inverse
// (the import is one batch, not sequential calls).

const importEntries = 4 // transcript messages per generated session

func runImport100k(ctx context.Context, e *env) (Result, error) {
	n := e.sz.list100k
	if e.o.Quick {
		n = 100 // every session costs several synced writes
	}
	dir := filepath.Join(e.dir, "openclaw-import")
	if err := e.timed(fmt.Sprintf("openclaw store: %d sessions, %d messages each", n, importEntries), n, func() error {
		return WriteOpenClawStore(dir, n, importEntries, e.loadNow)
	}); err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	st, err := openclawstore.Open(dir)
	if err != nil {
		return Result{}, err
	}
	defer st.Close()
	store, err := sessions.Open(ctx, e.js, e.names)
	if err != nil {
		return Result{}, err
	}
	cpu0 := processCPU()
	sum, err := openclawstore.Import(ctx, st, store, e.tr, openclawstore.Options{})
	if err != nil {
		return Result{}, err
	}
	cpu := processCPU() - cpu0
	if sum.Created != n || sum.Imported != n*importEntries {
		return Result{}, fmt.Errorf("import created %d sessions and %d entries, want %d and %d", sum.Created, sum.Imported, n, n*importEntries)
	}
	per := time.Duration(sum.Seconds * float64(time.Second) / float64(n))
	return Result{
		Ops: n, P50: int64(per), P99: int64(per),
		OpsPerSec: round(float64(n)/sum.Seconds, 1),
		CPUPerOp:  cpuPerOp(cpu, n),
		Dataset:   fmt.Sprintf("%d OpenClaw sessions of %d messages (file store), import --openclaw's default parallel 8, %.1f s", n, importEntries, sum.Seconds),
	}, nil
}

// WriteOpenClawStore writes an OpenClaw state directory at dir in the file
// layout: agent main's sessions.json with n entries (the shapes of
// sessions.Sample: direct chats, groups, sub-agents) and a transcript of
// msgs messages for each, updatedAt spread back from now (unix ms).
func WriteOpenClawStore(dir string, n, msgs int, now int64) error {
	sdir := filepath.Join(dir, "agents", "main", "sessions")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "openclaw.json"), []byte("{}\n"), 0o644); err != nil {
		return err
	}
	entries := make(map[string]json.RawMessage, n)
	var line strings.Builder
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		updated := now - int64(i)*1000
		var key, entry string
		switch i % 10 {
		case 0:
			key = fmt.Sprintf("agent:main:subagent:%s", id)
			entry = fmt.Sprintf(`{"sessionId":%q,"updatedAt":%d,"label":"task %d","spawnedBy":"agent:main:main","spawnDepth":1,"status":"done","startedAt":%d}`, id, updated, i, updated-60000)
		case 1, 2:
			key = fmt.Sprintf("agent:main:telegram:group:-100%d", i)
			entry = fmt.Sprintf(`{"sessionId":%q,"updatedAt":%d,"chatType":"group","channel":"telegram","displayName":"group %d","lastChannel":"telegram","lastTo":"-100%d"}`, id, updated, i, i)
		default:
			key = fmt.Sprintf("agent:main:telegram:direct:%d", 100000000+i)
			entry = fmt.Sprintf(`{"sessionId":%q,"updatedAt":%d,"chatType":"direct","channel":"telegram","displayName":"user %d","lastChannel":"telegram","lastTo":"%d","model":"gpt-4.1","inputTokens":120,"outputTokens":40}`, id, updated, i, 100000000+i)
		}
		entries[key] = json.RawMessage(entry)
		line.Reset()
		fmt.Fprintf(&line, `{"type":"session","version":3,"id":%q}`+"\n", id)
		for m := range msgs {
			role := "user"
			if m%2 == 1 {
				role = "assistant"
			}
			fmt.Fprintf(&line, `{"type":"message","id":"e%d","message":{"role":%q,"content":[{"type":"text","text":"message %d of session %d: plan the release and run the checks"}],"timestamp":%d}}`+"\n", m, role, m, i, updated-int64(msgs-m)*1000)
		}
		if err := os.WriteFile(filepath.Join(sdir, id+".jsonl"), []byte(line.String()), 0o644); err != nil {
			return err
		}
	}
	b, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(sdir, "sessions.json"), b, 0o644)
}
