package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText prints the report as tables, one section each; a section with
// nothing to show says so.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title string, n int, header string) bool {
		fmt.Fprintf(tw, "\n%s (%d)\n", title, n)
		if n == 0 {
			fmt.Fprintln(tw, "  none")
			return false
		}
		fmt.Fprintln(tw, header)
		return true
	}
	fmt.Fprintf(tw, "STREAMS (%d)\n", len(r.Streams))
	fmt.Fprintln(tw, "  name\tmessages\tbytes\tfirst\tlast\treplicas\tconsumers\tmax age")
	for _, s := range r.Streams {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\n", s.Name, s.Messages, size(s.Bytes), s.FirstSeq, s.LastSeq, s.Replicas, s.Consumers, dash(s.MaxAge))
	}
	if section("BUCKETS", len(r.Buckets), "  name\tvalues\tbytes\thistory\treplicas\tttl") {
		for _, b := range r.Buckets {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\t%s\n", b.Name, b.Values, size(b.Bytes), b.History, b.Replicas, dash(b.TTL))
		}
	}
	if r.Archive != nil {
		fmt.Fprintf(tw, "ARCHIVES\n  %s\n", r.Archive.Line())
	}
	if s := r.Search; s != nil {
		fmt.Fprintf(tw, "SEARCH INDEX\n  %s: stream sequence %d of %d indexed, lag %d\n", s.State, s.Applied, s.Last, s.Lag)
	}
	if section("CONSUMERS", len(r.Consumers), "  stream\tname\tdurable\tlag\tack pending\tredelivered\twaiting") {
		for _, c := range r.Consumers {
			fmt.Fprintf(tw, "  %s\t%s\t%v\t%d\t%d\t%d\t%d\n", c.Stream, c.Name, c.Durable, c.Lag, c.AckPending, c.Redelivered, c.Waiting)
		}
	}
	if section("STUCK RUNS", len(r.StuckRuns), "  run\tsession\tstatus\tgateway\tattempts\tage") {
		for _, x := range r.StuckRuns {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%v\n", x.RunID, x.SessionKey, x.Status, dash(x.Gateway), x.Attempts, time.Duration(x.AgeSeconds)*time.Second)
		}
	}
	if section("EXPIRED CHILDREN", len(r.ExpiredChildren), "  child\trequester\trun\toverdue") {
		for _, c := range r.ExpiredChildren {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%v\n", c.ChildSessionKey, c.RequesterSessionKey, c.RunID, time.Duration(c.OverdueSeconds)*time.Second)
		}
	}
	if section("PENDING ANNOUNCES", len(r.PendingAnnounces), "  child\trequester\trun\tstate\tattempts\tgateway\terror") {
		for _, a := range r.PendingAnnounces {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.ChildSessionKey, a.RequesterSessionKey, a.RunID, a.State, a.Attempts, dash(a.Gateway), dash(a.Error))
		}
	}
	if section("PENDING NOTICES", len(r.PendingNotices), "  watcher\ttarget\tlast seen\tnotified") {
		for _, n := range r.PendingNotices {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", n.Watcher, n.Target, n.LastSeenSequence, n.NotifiedSequence)
		}
	}
	if section("DEAD LETTERS", int(r.DeadLetterCount), "  seq\tdelivery\tchannel\tsession\tattempts\tstatus\tfailed at\terror") {
		if shown := len(r.DeadLetters); uint64(shown) < r.DeadLetterCount {
			fmt.Fprintf(tw, "  (the newest %d)\n", shown)
		}
		for _, d := range r.DeadLetters {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.Seq, d.DeliveryID, d.Channel, dash(d.SessionKey), d.Attempts, d.LastStatus,
				time.UnixMilli(d.FailedAt).UTC().Format(time.RFC3339), dash(oneLine(d.LastError)))
		}
	}
	return tw.Flush()
}

// oneLine keeps a table row one line: a receiver's error text may hold
// newlines and tabs.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// size is bytes in KiB or MiB, for reading at a glance (--json has bytes).
func size(b uint64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
