package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// auditReport is the part of `sessionbus audit --json` the tests read.
type auditReport struct {
	Summary  map[string]int `json:"summary"`
	Findings []struct {
		CheckID  string `json:"checkId"`
		Severity string `json:"severity"`
		Fix      string `json:"fix"`
	} `json:"findings"`
}

// sessionbus audit against the real binaries: serve as it starts is clean
// (exit 0), serve --insecure is a high finding (exit 1) whose fix is to
// drop --insecure.
func TestAuditServe(t *testing.T) {
	sb := binary(t, "sessionbus")
	cfg := filepath.Join(t.TempDir(), "sessionbus.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  sessions:\n    visibility: tree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := func(data, addr string, args ...string) (string, string, int) {
		return run(t, "", sb, append([]string{"audit", "--server", "nats://" + addr, "--data", data,
			"--creds", filepath.Join(data, "operator.creds"), "--config", cfg}, args...)...)
	}

	data := filepath.Join(t.TempDir(), "data")
	srv := start(t, "serve", "--no-gateway", "--data", data, "--listen", anyPort)
	_, addr := srv.ready(t)
	out, errOut, code := audit(data, addr)
	if code != 0 || !strings.Contains(out, "Summary: 0 high, 0 medium, 0 low, 0 info") || !strings.Contains(out, "No findings.") {
		t.Fatalf("audit of serve: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = audit(data, addr, "--json")
	var r auditReport
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || len(r.Findings) != 0 || r.Summary["high"] != 0 {
		t.Fatalf("audit --json of serve: exit %d %v\n%s%s", code, err, out, errOut)
	}

	data = filepath.Join(t.TempDir(), "data")
	srv = start(t, "serve", "--insecure", "--no-gateway", "--data", data, "--listen", anyPort)
	_, addr = srv.ready(t)
	out, errOut, code = audit(data, addr, "--json")
	r = auditReport{}
	if err := json.Unmarshal([]byte(out), &r); code != 1 || err != nil || r.Summary["high"] != 1 || len(r.Findings) != 1 ||
		r.Findings[0].CheckID != "nats.auth_off" || r.Findings[0].Severity != "high" || !strings.Contains(r.Findings[0].Fix, "without --insecure") {
		t.Fatalf("audit --json of serve --insecure: exit %d %v\n%s%s", code, err, out, errOut)
	}
	out, _, code = audit(data, addr)
	if code != 1 || !strings.Contains(out, "\nHIGH\nnats.auth_off  ") {
		t.Fatalf("audit of serve --insecure: exit %d\n%s", code, out)
	}
}
