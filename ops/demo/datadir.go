package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// MarkerFile, in a data dir, says the demo created it: each serve --demo
// on that dir starts over, so running the demo twice shows the same
// scenario instead of a tree that grows by three children a run.
const MarkerFile = "demo.txt"

const markerText = `This data dir was created by sessionbus serve --demo.
Each serve --demo on it starts over: the sessions (the JetStream store,
./jetstream) are removed first; the keys and credentials stay.
A serve without --demo keeps everything and removes this file, and the
demo then no longer starts over here.
`

// StoreDir is the JetStream store under a data dir, the state the demo
// removes to start over (embedded.Start keeps it there).
const StoreDir = "jetstream"

// DataDir is what serve --demo found in its data dir before starting.
type DataDir struct {
	Path string
	// Reset: remove the store before the server starts (a data dir the
	// demo created, or --fresh).
	Reset bool
	// state: new (no data dir yet, or empty), demo (the demo created it),
	// other (sessions the demo did not create), fresh (other, emptied).
	state string
}

// PrepareDataDir decides how serve --demo uses dir: a new or empty dir
// becomes the demo's own; the demo's own starts over; another sessionbus
// data dir is used as it is, unless fresh, which starts it over too. With
// fresh, a dir that is not empty and holds none of a sessionbus data dir's
// files is refused: nothing in it is removed.
func PrepareDataDir(dir string, fresh bool) (DataDir, error) {
	d := DataDir{Path: dir}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0:
		d.state = "new"
		return d, nil
	case err != nil:
		return d, fmt.Errorf("data dir %s: %v (pass a readable --data DIR)", dir, err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	switch {
	case names[MarkerFile]:
		d.state, d.Reset = "demo", true
	case fresh && !(names[bus.CredsFile] || names[auth.Dir] || names[StoreDir] || names["serve.lock"]):
		return d, fmt.Errorf("--fresh: %s is not a sessionbus data dir (it has no %s, %s or %s): refusing to empty it; pass the --data dir of a serve, or a new one", dir, bus.CredsFile, auth.Dir, StoreDir)
	case fresh:
		d.state, d.Reset = "fresh", true
	default:
		d.state = "other"
	}
	return d, nil
}

// Claim marks the data dir as the demo's own, once the server holds it;
// a dir with sessions the demo did not create stays unmarked.
func (d DataDir) Claim() error {
	if d.state == "other" {
		return nil
	}
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return fmt.Errorf("mark %s as the demo's data dir: %v", d.Path, err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, MarkerFile), []byte(markerText), 0o600); err != nil {
		return fmt.Errorf("mark %s as the demo's data dir: %v", d.Path, err)
	}
	return nil
}

// Disown removes the demo's mark from a data dir a serve without --demo
// now uses, so a later serve --demo does not remove what it stores.
// removed is false when the dir had no mark.
func Disown(dir string) (removed bool, err error) {
	err = os.Remove(filepath.Join(dir, MarkerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// startLine is what the demo says first about its data dir.
func (d DataDir) startLine() string {
	switch d.state {
	case "new":
		return fmt.Sprintf("demo: %s is the demo's own data dir: each serve --demo on it starts over", d.Path)
	case "demo":
		return fmt.Sprintf("demo: started over: the previous demo's sessions in %s were removed (keys and credentials kept)", d.Path)
	case "fresh":
		return fmt.Sprintf("demo: --fresh: the sessions in %s were removed (keys and credentials kept); it is the demo's own data dir from now on", d.Path)
	case "other":
		return fmt.Sprintf("demo: %s holds sessions the demo did not create: the scenario runs on top of them, and the tree grows with each run", d.Path)
	}
	return ""
}

// resetHint says how to see the demo again from the start.
func (d DataDir) resetHint(cmd string) string {
	if d.state == "other" {
		return fmt.Sprintf("to start from empty: Ctrl-C, then %s serve --demo --fresh with the same flags (removes the sessions in %s; keys and credentials stay), or pass --data a new dir", cmd, d.Path)
	}
	return fmt.Sprintf("to start over: Ctrl-C, then %s serve --demo again with the same flags (this data dir is the demo's own: it starts fresh each time)", cmd)
}
