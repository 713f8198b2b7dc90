package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareDataDir: a new or empty dir becomes the demo's own, the
// demo's own starts over, another sessionbus data dir is used as it is
// unless --fresh, and --fresh refuses a dir that is not a sessionbus data
// dir without touching it.
func TestPrepareDataDir(t *testing.T) {
	write := func(dir string, names ...string) {
		for _, n := range names {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(n)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	root := t.TempDir()
	for _, c := range []struct {
		name  string
		files []string
		fresh bool
		state string
		reset bool
	}{
		{"missing", nil, false, "new", false},
		{"empty", nil, true, "new", false},
		{"the demo's", []string{MarkerFile, "operator.creds", "jetstream/x"}, false, "demo", true},
		{"another deployment's", []string{"operator.creds", "jetstream/x"}, false, "other", false},
		{"another deployment's, fresh", []string{"operator.creds", "jetstream/x"}, true, "fresh", true},
	} {
		dir := filepath.Join(root, strings.ReplaceAll(c.name, " ", "-"))
		if c.name != "missing" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		write(dir, c.files...)
		d, err := PrepareDataDir(dir, c.fresh)
		if err != nil || d.state != c.state || d.Reset != c.reset {
			t.Errorf("%s: state %q reset %v err %v; want %q %v", c.name, d.state, d.Reset, err, c.state, c.reset)
			continue
		}
		if err := d.Claim(); err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(filepath.Join(dir, MarkerFile))
		if marked := statErr == nil; marked != (c.state != "other") {
			t.Errorf("%s: marked %v after Claim", c.name, marked)
		}
	}

	notOurs := filepath.Join(root, "photos")
	write(notOurs, "cat.jpg")
	if _, err := PrepareDataDir(notOurs, true); err == nil || !strings.Contains(err.Error(), "is not a sessionbus data dir") {
		t.Errorf("--fresh on a dir that is not a data dir: %v", err)
	}
	if d, err := PrepareDataDir(notOurs, false); err != nil || d.Reset {
		t.Errorf("without --fresh a dir is never reset: %+v %v", d, err)
	}
	if _, err := os.Stat(filepath.Join(notOurs, "cat.jpg")); err != nil {
		t.Errorf("the refused dir lost its file: %v", err)
	}

	demoDir := filepath.Join(root, "the-demo's")
	if removed, err := Disown(demoDir); !removed || err != nil {
		t.Errorf("Disown of the demo's dir: %v %v", removed, err)
	}
	if d, _ := PrepareDataDir(demoDir, false); d.Reset {
		t.Error("a dir a serve without --demo took over is still started over")
	}
	if removed, err := Disown(demoDir); removed || err != nil {
		t.Errorf("Disown of an unmarked dir: %v %v", removed, err)
	}
}
