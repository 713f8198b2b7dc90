package sessionbus_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxPerformanceLines bounds docs/performance.md: the current figures, how
// to reproduce them and where the time goes, not a log of every run (the
// dated notes in docs/notes/ keep those).
const maxPerformanceLines = 300

func TestPerformanceDocStaysShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n >= maxPerformanceLines {
		t.Errorf("docs/performance.md has %d lines, the limit is under %d: keep the current figures and move old runs to a dated note in docs/notes/", n, maxPerformanceLines)
	}
}

// Every package of the module is named in docs/architecture.md, so the
// map a newcomer reads is the whole module.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		pkg := relPath(strings.TrimSpace(line))
		if pkg == "." {
			continue
		}
		if !bytes.Contains(doc, []byte("`"+pkg+"`")) {
			t.Errorf("docs/architecture.md does not name package %s: add it to the Packages table with what it holds", pkg)
		}
	}
}

// docPages are the markdown files the docs tests read, relative to the
// module root: README.md, docs/*.md and docs/notes/*.md.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "docs/notes/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			pages = append(pages, filepath.ToSlash(rel))
		}
	}
	return pages
}

// noteName is how a note is named: the date its measurements were last
// taken, then its topic.
var noteName = regexp.MustCompile(`^notes/[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9]+(-[a-z0-9]+)*\.md$`)

// TestDocsIndexListsEveryPage: docs/README.md links every page of docs/
// and every note of docs/notes/, and nothing that does not exist, so the
// index is the whole folder.
func TestDocsIndexListsEveryPage(t *testing.T) {
	root := moduleRoot(t)
	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatalf("docs/README.md, the index of docs/: %v", err)
	}
	linked := map[string]bool{}
	for _, l := range markdownLinks(string(index)) {
		target, _, _ := strings.Cut(l.target, "#")
		if target == "" || isExternal(target) {
			continue
		}
		linked[target] = true
		if _, err := os.Stat(filepath.Join(root, "docs", filepath.FromSlash(target))); err != nil {
			t.Errorf("docs/README.md:%d links %s, which does not exist: drop the line or fix the path", l.line, target)
		}
	}
	for _, page := range docPages(t, root) {
		rel, ok := strings.CutPrefix(page, "docs/")
		if !ok || rel == "README.md" {
			continue
		}
		if !linked[rel] {
			t.Errorf("docs/README.md does not link %s: add it under guides, references or notes with one line saying what it answers", page)
		}
		if strings.HasPrefix(rel, "notes/") && !noteName.MatchString(rel) {
			t.Errorf("%s: name a note YYYY-MM-DD-topic.md, the date its measurements were last taken", page)
		}
	}
}

// commitRefs are the ways the docs used to cite a commit: "commit abc1234",
// "at `abc1234`", "before abc1234", "(abc1234^)", a table cell "`abc1234`".
// They say which words lead to the id rather than matching any hex run, as
// the docs legitimately hold hex that is no commit id: ed25519, the
// example UUIDs (6fcdb5c6-…), message ids, a version line's build id.
var commitRefs = []*regexp.Regexp{
	regexp.MustCompile("(?i)\\b(?:commits?|at|before|after|since|until|from|to|and|tree of)\\s+[(`]*([0-9a-f]{7,40})\\b"),
	regexp.MustCompile("`([0-9a-f]{7,40})\\^?`"),
	regexp.MustCompile(`\b([0-9a-f]{7,40})\^`),
}

// commitIDs returns the commit ids text cites. An id has a digit and a
// letter (a word such as "defaced" or a number such as 1001234 is not one)
// and is not a fragment of a UUID (followed by "-").
func commitIDs(text string) []string {
	var ids []string
	for _, re := range commitRefs {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			id := text[m[2]:m[3]]
			if m[3] < len(text) && text[m[3]] == '-' {
				continue
			}
			if !strings.ContainsAny(id, "0123456789") || !strings.ContainsAny(id, "abcdef") {
				continue
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// The pages say what holds today; which commit a figure was measured at
// is a note's business (docs/notes/), where a reader looking for the
// history finds it dated.
func TestDocsCiteNoCommitIDs(t *testing.T) {
	root := moduleRoot(t)
	for _, page := range docPages(t, root) {
		if strings.HasPrefix(page, "docs/notes/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if ids := commitIDs(line); len(ids) > 0 {
				t.Errorf("%s:%d cites commit %s: state what holds today, and keep the run that measured it in a dated note in docs/notes/", page, i+1, strings.Join(ids, ", "))
			}
		}
	}
}

// TestCommitIDsFindsCitations pins what commitIDs catches and what it
// leaves: the cited forms are taken from the notes, the others from pages.
func TestCommitIDsFindsCitations(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"# 1 and 2: the tree of commit 5854d5f, load average 1.4-1.9", []string{"5854d5f"}},
		{"The announce rows were counted at commit `b404f64` (cmd 7's tree)", []string{"b404f64"}},
		{"8.03 and 592 / 3,680 sends/s before 4b0299b and 405f602)", []string{"4b0299b", "405f602"}},
		{"| lane (commit `e95d024`) | 2.9–3.4 | 374 |", []string{"e95d024"}},
		{"| per entry, CPU | before (c7eef66^) | after (8c803d5) |", []string{"c7eef66", "8c803d5"}},
		{"| `154c5df` | `60c5976` |", []string{"154c5df", "60c5976"}},
		{"git show c7eef66^ for the change before it", []string{"c7eef66"}},
		{"eight runs at commit `d43287c`, median 2.56x", []string{"d43287c"}},
		{"**The plain decoder (commits `dd43efc`–`60c5976`): 1.4–1.5x.**", []string{"dd43efc", "60c5976"}},
		{"at 60c5976: a full commit 0123456789abcdef0123456789abcdef01234567", []string{"60c5976", "0123456789abcdef0123456789abcdef01234567"}},
		{"every key signed with ed25519 (nkeys)", nil},
		{`{"runId":"6fcdb5c6-...","seq":1,"type":"text","delta":"hello "}`, nil},
		{"run a21f903b-…  started  gateway serve, attempt 1", nil},
		{"to 64f5d6e9-2b1a-4c3e-9d0f-91c2ccd124db", nil},
		{"🦞 sessionbus 0.1.0 (a1b2c3d)", nil},
		{"`sessionbus version` prints the commit (with its time)", nil},
		{"the limit at 1001234 bytes, and at 4194304", nil},
		{"a colour #ff00aa and a word defaced at deadbeef", nil},
	} {
		if got := commitIDs(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("commitIDs(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

type mdLink struct {
	line   int
	target string
}

// markdownLink is an inline link or image: [text](target), the target up
// to the first space (a title may follow) or the closing parenthesis.
var markdownLink = regexp.MustCompile(`\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)`)

// markdownLinks returns the inline links of a markdown text outside fenced
// code blocks and code spans, where "](x)" is text and no link.
func markdownLinks(text string) []mdLink {
	var out []mdLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range markdownLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, "``"), -1) {
			out = append(out, mdLink{line: i + 1, target: m[1]})
		}
	}
	return out
}

var codeSpan = regexp.MustCompile("`[^`]*`")

func isExternal(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:")
}

// anchors returns the fragment ids GitHub gives a markdown text's
// headings: lower case, punctuation dropped but for - and _, spaces made
// -, and -1, -2... on repeats; and the ids of its HTML anchors.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			ids[m[1]] = true
		}
		h := heading.FindStringSubmatch(line)
		if h == nil {
			continue
		}
		title := inlineLink.ReplaceAllString(h[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsNumber(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

var (
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// TestDocsLinksResolve: every relative link in README.md, docs/ and
// docs/notes/ reaches a file or folder of the repository, and a link to a
// markdown heading (page.md#id, or #id on the same page) reaches a heading
// that has that id, so moving a section between pages breaks this test
// rather than the reader's click.
func TestDocsLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	pageAnchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := pageAnchors[page]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			return nil, err
		}
		pageAnchors[page] = anchors(string(b))
		return pageAnchors[page], nil
	}
	for _, page := range docPages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			if isExternal(l.target) {
				continue
			}
			target, frag, _ := strings.Cut(l.target, "#")
			dest := page
			if target != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(page), target))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d links %s, outside the repository", page, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s:%d links %s: %s does not exist", page, l.line, l.target, dest)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			ids, err := anchorsOf(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !ids[frag] {
				t.Errorf("%s:%d links %s: %s has no heading with the id #%s (moved to a note? link the note)", page, l.line, l.target, dest, frag)
			}
		}
	}
}
