package sessionbus_test

import (
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citations are the ways a comment used to point at text a reader of this
// repository cannot open: a design file that is not in the repo, sections
// of an outside reference (a section sign and number), the tracker's issue numbers. A comment
// states the fact instead, or links a file in the repo (docs/...).
var citations = []struct {
	what string
	re   *regexp.Regexp
}{
	{"the design file (not in the repository)", regexp.MustCompile(`DESIGN` + `\.md`)},
	{"a section sign (a reference section)", regexp.MustCompile(`\x{00A7}`)},
	{"an issue number", regexp.MustCompile(`[Ii]ssues?[ -]#?[0-9]+`)},
}

// sourceMarkers are the bracket markers that named one of two outside
// sources ("[A]", "[B]"). They are looked for in comments only: in code,
// `Set[A]` is a type parameter.
var sourceMarkers = regexp.MustCompile(`\[[AB]\]`)

// TestNoCitationsInSource walks the module's non-test .go files and fails on
// any citation above: the history of a decision lives in git, and what the
// code does is said where it is done.
func TestNoCitationsInSource(t *testing.T) {
	root := moduleRoot(t)
	files, err := sourceFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no .go files under %s", root)
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(src), "\n") {
			for _, c := range citations {
				if m := c.re.FindString(line); m != "" {
					t.Errorf("%s:%d: %s (%q): state the fact, or link a file in the repo", rel, i+1, c.what, m)
				}
			}
		}
		for _, c := range comments(src) {
			if m := sourceMarkers.FindString(c.text); m != "" {
				t.Errorf("%s:%d: source marker %s in a comment: name the source (OpenClaw) or state the fact", rel, c.line, m)
			}
		}
	}
}

type comment struct {
	line int
	text string
}

// comments returns every comment of a Go source file with its first line.
func comments(src []byte) []comment {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []comment
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, comment{line: fset.Position(pos).Line, text: lit})
		}
	}
}
