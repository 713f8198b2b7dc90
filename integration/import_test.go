package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Importing the same 1,000-line file twice through the CLI leaves 1,000
// entries (the second run says so and appends nothing).
func TestImportTwiceThroughCLI(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--no-gateway")
	url, _ := srv.ready(t)
	var file strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&file, "{\"role\":\"user\",\"content\":\"line %d\"}\n", i)
	}
	const key = "agent:main:twice"
	want := []string{"imported 1000 entries", "already imported: all 1000 entries"}
	for i, w := range want {
		out, errOut, code := run(t, file.String(), sb, "import", "--server", url, "--creds", filepath.Join(data, "operator.creds"), key)
		if code != 0 || !strings.Contains(errOut, w) {
			t.Fatalf("import %d: code %d stderr %q, want %q", i+1, code, errOut, w)
		}
		var res struct {
			Imported int `json:"imported"`
			Total    int `json:"totalEntries"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("import %d stdout %q: %v", i+1, out, err)
		}
		if res.Total != 1000 || res.Imported != 1000*(1-i) {
			t.Fatalf("import %d: %+v, want 1000 entries in all", i+1, res)
		}
	}
}
