package handlers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

func TestImportRefusesBadInputWritingNothing(t *testing.T) {
	s := handlerstest.Start(t, nil)
	d := s.Worker.Deps
	for _, c := range []struct {
		key, lines, want string
	}{
		{"", `{"role":"user","content":"x"}`, "sessionKey"},
		{"../../etc", `{"role":"user","content":"x"}`, "invalid"},
		{strings.Repeat("k", 10*1024), `{"role":"user","content":"x"}`, "invalid"},
		{"agent:main:x", "{\"role\":\"user\",\"content\":\"ok\"}\n[1]", "line 2"},
		{"agent:main:x", `{"content":"no role"}`, `no "role"`},
		{"agent:main:x", `{"type":"message"}`, `no "message"`},
	} {
		_, err := importer.Import(t.Context(), d.Store, d.Transcripts, importer.ImportOptions{SessionKey: c.key}, strings.NewReader(c.lines), time.Now())
		e, ok := bus.AsError(err)
		if !ok || e.Code != 400 || !strings.Contains(e.Message, c.want) {
			t.Errorf("import %.20q: %v, want a 400 mentioning %q", c.key, err, c.want)
		}
	}
	if err := d.Index.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := d.Index.Len(); n != 0 {
		t.Fatalf("refused imports wrote %d sessions", n)
	}
}

func transcriptLines(n int, tag string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"role\":\"user\",\"content\":\"%s line %d\"}\n", tag, i)
	}
	return b.String()
}

func importFile(t *testing.T, s *handlerstest.Stack, key, body string) *importer.ImportResult {
	t.Helper()
	d := s.Worker.Deps
	res, err := importer.Import(t.Context(), d.Store, d.Transcripts, importer.ImportOptions{SessionKey: key}, strings.NewReader(body), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// An import writes the store directly, not through the worker: its
	// watched index (what sessions_list reads) has the entry only once the
	// watch delivers it, as Stack.Import waits for too.
	if err := d.Index.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return res
}

// checkTranscript asserts the session holds exactly want, in order.
func checkTranscript(t *testing.T, s *handlerstest.Stack, key string, want []string) {
	t.Helper()
	got, err := s.Worker.Deps.Transcripts.Read(t.Context(), bus.EncodeKey(key), 0, uint64(len(want))+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s has %d entries, want %d", key, len(got), len(want))
	}
	for i, e := range got {
		if string(e.Data) != want[i] {
			t.Fatalf("%s entry %d = %s, want %s", key, i, e.Data, want[i])
		}
	}
}

func lines(body string) []string { return strings.Split(strings.TrimSpace(body), "\n") }

// The same file imported twice is there once; another file is appended; the
// same file into another session is imported there too.
func TestImportIsIdempotent(t *testing.T) {
	s := handlerstest.Start(t, nil)
	const key = "agent:main:imported"
	file := transcriptLines(300, "a")
	if r := importFile(t, s, key, file); r.Imported != 300 || r.Present != 0 {
		t.Fatalf("first import %+v", r)
	}
	r := importFile(t, s, key, "\n"+file+"\n") // blank lines do not make another file
	if r.Imported != 0 || r.Present != 300 || r.Total != 300 || !strings.HasPrefix(r.Summary(), "already imported") {
		t.Fatalf("repeat %+v (%s)", r, r.Summary())
	}
	other := transcriptLines(5, "b")
	if r := importFile(t, s, key, other); r.Imported != 5 || r.Total != 305 {
		t.Fatalf("another file %+v", r)
	}
	checkTranscript(t, s, key, append(lines(file), lines(other)...))
	if r := importFile(t, s, "agent:main:copy", file); r.Imported != 300 {
		t.Fatalf("same file, other session %+v", r)
	}
}

// An import that stopped half-way (its mark written, some entries
// appended) is finished by running it again, without doubling; one that
// stopped before appending anything, with other entries written since,
// lands after them.
func TestImportResumesAfterInterruption(t *testing.T) {
	s := handlerstest.Start(t, nil)
	d := s.Worker.Deps
	file := transcriptLines(1000, "c")
	want := lines(file)
	id, err := importer.ImportID(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	interrupted := func(key string, landed int) {
		t.Helper()
		if _, err := d.Store.Create(t.Context(), &sessions.Entry{Key: key, AgentID: "main"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.Store.Update(t.Context(), key, func(e *sessions.Entry) error {
			e.SetImport(sessions.ImportMark{ID: id, At: 0, N: len(want)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < landed; i += 100 { // what the killed run appended, batch by batch
			batch := make([][]byte, 0, 100)
			for _, l := range want[i:min(i+100, landed)] {
				batch = append(batch, []byte(l))
			}
			if _, err := d.Transcripts.Append(t.Context(), bus.EncodeKey(key), batch...); err != nil {
				t.Fatal(err)
			}
		}
	}
	interrupted("agent:main:half", 400)
	r := importFile(t, s, "agent:main:half", file)
	if r.Imported != 600 || r.Present != 400 || !strings.HasPrefix(r.Summary(), "resumed: appended 600 of 1000") {
		t.Fatalf("resume %+v (%s)", r, r.Summary())
	}
	checkTranscript(t, s, "agent:main:half", want)
	if r := importFile(t, s, "agent:main:half", file); r.Imported != 0 {
		t.Fatalf("after resume %+v", r)
	}

	interrupted("agent:main:none", 0)
	run := `{"role":"assistant","content":"written meanwhile"}`
	if _, err := d.Transcripts.Append(t.Context(), bus.EncodeKey("agent:main:none"), []byte(run)); err != nil {
		t.Fatal(err)
	}
	if r := importFile(t, s, "agent:main:none", file); r.Imported != 1000 || r.FirstEntry != 1 {
		t.Fatalf("restart after nothing landed %+v", r)
	}
	checkTranscript(t, s, "agent:main:none", append([]string{run}, want...))
}

// A key OpenClaw accepts with an IPv6 literal (a doubled ":") imports, and
// the tools find the session under exactly that key.
func TestImportMatrixIPv6RoomKey(t *testing.T) {
	const key = "agent:main:matrix:channel:!room:[2001:db8::1]"
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "all" })
	res := importFile(t, s, key, `{"role":"user","content":"hello from matrix"}`)
	if !res.Created || res.Imported != 1 {
		t.Fatalf("import = %+v, want a created session with 1 entry", res)
	}
	h := s.MustCall("agent:main:main", "sessions_history", `{"sessionKey":"`+key+`"}`)
	if h["sessionKey"] != key {
		t.Errorf("sessions_history sessionKey = %v, want %s", h["sessionKey"], key)
	}
	msgs, _ := h["messages"].([]any)
	if len(msgs) != 1 || !strings.Contains(fmt.Sprint(msgs[0]), "hello from matrix") {
		t.Errorf("sessions_history messages = %v, want the imported line", msgs)
	}
	l := s.MustCall("agent:main:main", "sessions_list", `{}`)
	found := false
	for _, r := range l["sessions"].([]any) {
		if r.(map[string]any)["key"] == key {
			found = true
		}
	}
	if !found {
		t.Errorf("sessions_list does not list %s: %v", key, l["sessions"])
	}
}

// Identical imports running at once leave the file in the session once:
// the appends are conditional on the transcript's length, so the run that
// loses a position re-reads and finds the other's entries.
func TestConcurrentIdenticalImportsDoNotDouble(t *testing.T) {
	s := handlerstest.Start(t, nil)
	d := s.Worker.Deps
	file := transcriptLines(600, "race")
	for round := range 3 {
		key := fmt.Sprintf("agent:main:race%d", round)
		const runs = 4
		errs := make(chan error, runs)
		start := make(chan struct{})
		for range runs {
			go func() {
				<-start
				_, err := importer.Import(t.Context(), d.Store, d.Transcripts, importer.ImportOptions{SessionKey: key}, strings.NewReader(file), time.Now())
				errs <- err
			}()
		}
		close(start)
		for range runs {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		checkTranscript(t, s, key, lines(file))
	}
}
