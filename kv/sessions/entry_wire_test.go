package sessions

import (
	"bytes"
	"os"
	"testing"

	"github.com/sessionbus/sessionbus/kv/sessions/internal/wiregen"
)

// entry_wire.go is what the declarations of Entry, RareFields and
// entryJSON in entry.go give: this fails when one of them changed and
// go generate ./kv/sessions/ was not run.
func TestEntryWireGenerated(t *testing.T) {
	want, err := wiregen.Generate("entry.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("entry_wire.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("entry_wire.go is not what entry.go's declarations give: run go generate ./kv/sessions/")
	}
}
