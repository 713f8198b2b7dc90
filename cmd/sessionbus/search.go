package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/ops/search"
)

func cmdSearch(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("search", stderr)
	of := newOpsFlags(fs)
	agent := fs.String("agent", "", "only this agent's sessions")
	channel := fs.String("channel", "", "only sessions on this channel")
	kind := fs.String("kind", "", "only sessions of this kind: main, group, cron, hook, node, other")
	since := fs.String("since", "", "only entries stored since: a duration back from now (24h) or RFC 3339 time")
	until := fs.String("until", "", "only entries stored before: a duration back from now (1h) or RFC 3339 time")
	limit := fs.Int("limit", search.MaxResults, fmt.Sprintf("hits per page (1..%d)", search.MaxResults))
	offset := fs.Int("offset", 0, "skip this many hits (the next page)")
	rank := fs.Bool("rank", false, "best match first instead of newest first")
	archived := fs.Bool("archived", false, "search the archived sessions too (their hits name the archive)")
	timeout := fs.Duration("timeout", 10*time.Second, "give up waiting for an answer after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, `sessionbus search: give the text to find as one argument, after the flags: sessionbus search --agent main "deploy failed"`)
		return 2
	}
	q := &search.Query{Text: fs.Arg(0), Agent: *agent, Channel: *channel, Kind: *kind, Limit: *limit, Offset: *offset, Archived: *archived}
	if *rank {
		q.Order = search.OrderRank
	}
	var err error
	if q.Since, err = cliTime("since", *since); err == nil {
		q.Until, err = cliTime("until", *until)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus search:", err)
		return 2
	}
	if r, err := auth.RoleOf(*of.creds); err == nil && r != "" && r != auth.RoleOps && r != auth.RoleAdmin {
		return fail(stderr, bus.CodeForbidden, fmt.Errorf("credentials %s are the %s role's: only ops and admin may search (pass --creds DATA/creds/ops.creds or DATA/operator.creds)", *of.creds, r))
	}
	nc, _, err := of.open("search")
	if err != nil {
		_ = failLine(stderr, "search", err)
		return 1
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := search.Ask(ctx, nc, bus.NewNames(*of.prefix), q)
	if err != nil {
		return fail(stderr, bus.CodeInternal, err)
	}
	if *of.asJSON {
		printJSON(stdout, res)
		return 0
	}
	writeHits(stdout, res)
	return 0
}

// cliTime reads --since/--until: a duration back from now or RFC 3339.
func cliTime(flag, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return json.RawMessage(fmt.Sprint(time.Now().Add(-d).UnixMilli())), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return json.Marshal(t.Format(time.RFC3339Nano))
	}
	return nil, fmt.Errorf("--%s %q: give a duration back from now (24h, 90m) or RFC 3339 time (2026-01-02T15:04:05Z)", flag, v)
}

func writeHits(w io.Writer, res *search.Result) {
	for _, h := range res.Results {
		ts := time.UnixMilli(h.Timestamp).UTC().Format(time.RFC3339)
		where := h.SessionKey
		if h.Archive != "" {
			where += " (archive " + h.Archive + ")"
		}
		fmt.Fprintf(w, "%s  %s #%d %s: %s\n", ts, where, h.Entry, h.Role, strings.Join(strings.Fields(h.Snippet), " "))
	}
	more := ""
	if res.More {
		more = fmt.Sprintf("; more: --offset %d", res.Offset+len(res.Results))
	}
	fmt.Fprintf(w, "%d hits (index at stream sequence %d of %d, lag %d%s)\n", len(res.Results), res.Index.Applied, res.Index.Last, res.Index.Lag, more)
}
