// Command testtimes reads `go test -json` on stdin and prints what plain
// `go test` prints (each package's ok/FAIL line, and the whole output of
// every failing test), then the time each package took and the slowest
// tests, so a CI log says where its minutes went. It exits 1 when any
// package or build failed.
//
//	go test -json ./... | go run .ci/testtimes.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type timing struct {
	name    string
	seconds float64
}

func main() {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	buffered := map[string][]string{} // package + test -> its output lines
	var packages, tests []timing
	failed := false
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// not an event (a line go test wrote itself): pass it on
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Action == "output" && e.Test == "":
			fmt.Fprint(out, e.Output)
		case e.Action == "output":
			buffered[key] = append(buffered[key], e.Output)
		case e.Test != "" && (e.Action == "pass" || e.Action == "skip" || e.Action == "fail"):
			if e.Action == "fail" {
				fmt.Fprint(out, strings.Join(buffered[key], ""))
			}
			delete(buffered, key)
			if !strings.Contains(e.Test, "/") && e.Action != "skip" {
				tests = append(tests, timing{e.Package + " " + e.Test, e.Elapsed})
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail"):
			if e.Action == "fail" {
				failed = true
			}
			packages = append(packages, timing{e.Package, e.Elapsed})
		}
		out.Flush()
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testtimes:", err)
		failed = true
	}
	report(out, "seconds per package", packages, len(packages))
	report(out, "slowest tests, seconds", tests, 20)
	if failed {
		out.Flush()
		os.Exit(1)
	}
}

func report(out *bufio.Writer, title string, ts []timing, n int) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].seconds > ts[j].seconds })
	fmt.Fprintf(out, "\n%s:\n", title)
	for i, t := range ts {
		if i == n {
			break
		}
		fmt.Fprintf(out, "%8.1f  %s\n", t.seconds, strings.TrimPrefix(t.name, "github.com/sessionbus/sessionbus/"))
	}
}
