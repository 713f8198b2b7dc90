package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sessionbus/sessionbus/config"
)

// cmdInit writes the example configuration (config.Example: every key
// with its default) as DIR/sessionbus.yaml, never over an existing file.
func cmdInit(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	flags := newFlags("init", stderr)
	toStdout := flags.Bool("print", false, "print the example on stdout instead of writing a file")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 1 {
		flags.Usage()
		return 2
	}
	if *toStdout {
		if flags.NArg() != 0 {
			_ = failLine(stderr, "init", errors.New("--print writes to stdout: give no DIR"))
			return 2
		}
		_, _ = stdout.Write(config.Example())
		return 0
	}
	dir := "."
	if flags.NArg() == 1 {
		dir = flags.Arg(0)
	}
	path := filepath.Join(dir, config.ExampleFile)
	if err := writeNew(path, config.Example()); err != nil {
		_ = failLine(stderr, "init", err)
		return 1
	}
	fmt.Fprintln(stdout, path)
	fmt.Fprintf(stderr, "wrote every configuration key with its default; edit it, then: sessionbus serve --config %s\n", path)
	return 0
}

// writeNew creates path with b, refusing an existing file; a write that
// fails leaves no file behind.
func writeNew(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %v (pass a writable DIR)", filepath.Dir(path), err)
	}
	// 0600: a config often gains an endpoint's API key
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: nothing written (move it away, or pass another DIR)", path)
	}
	if err != nil {
		return fmt.Errorf("create %s: %v (pass a writable DIR)", path, err)
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %v (nothing left behind)", path, werr)
	}
	return nil
}
