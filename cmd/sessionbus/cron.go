package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/rules/cronspec"
)

// cronOps are the subcommands of `sessionbus cron`, OpenClaw's.
var cronOps = []string{"add", "list", "edit", "enable", "disable", "rm", "run", "runs"}

func init() {
	subcommands["cron"] = cronOps
	flagsPerSub["cron"] = true
	helps["cron"] = cmdHelp{
		usage: "cron add [flags] (--at T | --every D | --cron EXPR) (--message TEXT | --system-event TEXT)\n" +
			"sessionbus cron list [flags]\nsessionbus cron edit [flags] JOBID\n" +
			"sessionbus cron enable|disable|rm|run [flags] JOBID\nsessionbus cron runs [flags] --id JOBID",
		purpose: "Schedule agent turns: OpenClaw's cron jobs, fired by the NATS server's message scheduler, once per tick across the workers.",
		notes: "--session isolated (the default with --message) runs a fresh turn in agent:<id>:cron:<jobId>:run:<runId> and\n" +
			"announces its reply to --channel/--to (an adapter must serve the channel); --no-deliver keeps it internal.\n" +
			"--session main (the default with --system-event) puts \"System: <text>\" into the agent's main session.\n" +
			"One-shot --at jobs delete themselves after a successful run unless --keep-after-run. See docs/cron.md.",
		examples: []string{
			`sessionbus cron add --name "Morning brief" --cron "0 7 * * *" --tz America/Los_Angeles --message "Summarize overnight updates." --no-deliver`,
			"sessionbus cron list",
			"sessionbus cron runs --id JOBID --limit 50",
		},
	}
}

// cronCmdFlags are the flags of every cron subcommand (the job's only on
// add and edit).
type cronCmdFlags struct {
	fs                               *flag.FlagSet
	server                           serverFlags
	creds, prefix                    *string
	timeout                          *time.Duration
	json                             *bool
	name, desc, agent, at, every     *string
	expr, tz, session, message, text *string
	wake, channel, to                *string
	announce, noDeliver, bestEffort  *bool
	deleteAfter, keepAfter, disabled *bool
	timeoutSeconds                   *int
	id                               *string
	limit                            *int
}

func cronFlags(fs *flag.FlagSet, op string) cronCmdFlags {
	f := cronCmdFlags{
		fs:      fs,
		server:  newServerFlags(fs),
		creds:   fs.String("creds", defaultCreds(), "operator credentials: mint the ops token and, with NATS auth, carry the NATS user"),
		prefix:  fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)"),
		timeout: fs.Duration("timeout", 30*time.Second, "how long to wait for a worker"),
		json:    fs.Bool("json", false, "print the worker's reply as JSON (list prints a table without it)"),
	}
	if op == "add" || op == "edit" || op == "all" {
		f.name = fs.String("name", "", "the job's name")
		f.desc = fs.String("description", "", "what the job is for")
		f.agent = fs.String("agent", "", "agent id the job runs as (default main; must be in agents.list when it has entries)")
		f.at = fs.String("at", "", "one-shot: ISO time (UTC without an offset, unless --tz) or a duration from now such as 20m")
		f.every = fs.String("every", "", "repeat every duration, such as 30s, 15m or 1h")
		f.expr = fs.String("cron", "", `cron expression: 5 fields, or 6 with seconds first ("0 7 * * *")`)
		f.tz = fs.String("tz", "", "IANA time zone of --cron (or of an --at without an offset); default UTC")
		f.session = fs.String("session", "", "main (a system event into the main session) or isolated (a turn of its own)")
		f.message = fs.String("message", "", "the isolated turn's message (agentTurn)")
		f.text = fs.String("system-event", "", "the system event's text for the main session (systemEvent)")
		f.wake = fs.String("wake", "", "now or next-heartbeat (sessionbus has no heartbeat: both run at the tick)")
		f.announce = fs.Bool("announce", false, "deliver the isolated run's reply to --channel/--to (the default)")
		f.noDeliver = fs.Bool("no-deliver", false, "keep the isolated run's reply internal")
		f.channel = fs.String("channel", "", "channel to announce to (an adapter must serve it); default: the main session's last route")
		f.to = fs.String("to", "", "channel-specific target of the announce")
		f.bestEffort = fs.Bool("best-effort-deliver", false, "do not fail the job when the announce cannot be delivered")
		f.deleteAfter = fs.Bool("delete-after-run", false, "delete the job after a successful run (the default for --at)")
		f.keepAfter = fs.Bool("keep-after-run", false, "keep an --at job after its run (it is disabled instead)")
		f.disabled = fs.Bool("disabled", false, "add the job disabled")
		f.timeoutSeconds = fs.Int("timeout-seconds", 0, "the turn's timeout (0: the gateway's default)")
	}
	if op == "runs" || op == "all" {
		f.id = fs.String("id", "", "the job whose runs to list")
		f.limit = fs.Int("limit", 20, "at most this many runs, newest first (0: all)")
	}
	return f
}

func cmdCron(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	op := ""
	if len(args) > 0 {
		op = args[0]
	}
	switch op {
	case "-h", "--help", "-help", "help":
		cronFlags(newFlags("cron", stdout), "all").fs.Usage()
		return 0
	}
	if !strings.Contains(" "+strings.Join(cronOps, " ")+" ", " "+op+" ") {
		writeHelp(stderr, "cron", nil)
		return 2
	}
	f := cronFlags(newFlags("cron "+op, stderr), op)
	if err := f.fs.Parse(args[1:]); err != nil {
		return 2
	}
	body, err := cronBody(op, f, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "sessionbus cron %s: %v\n", op, err)
		f.fs.Usage()
		return 2
	}
	o, err := bus.LoadOperator(*f.creds)
	if err != nil {
		return fail(stderr, bus.CodeUnauthorized, err)
	}
	token, err := o.Mint(bus.Caller{Adapter: bus.AnyChannel}, *f.timeout+time.Minute)
	if err != nil {
		return fail(stderr, bus.CodeInternal, err)
	}
	nc, err := f.server.connect("sessionbus cron "+op, credsOptions(*f.creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *f.timeout)
	defer cancel()
	reply, err := bus.CronOp(ctx, nc, bus.NewNames(*f.prefix), op, token, body)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	if op == "list" && !*f.json {
		return printCronList(reply, stdout, stderr)
	}
	return printReply(stdout, reply)
}

// cronBody is op's request body from its flags and arguments; an error is
// a usage error (exit 2).
func cronBody(op string, f cronCmdFlags, now time.Time) ([]byte, error) {
	args := f.fs.Args()
	switch op {
	case "list":
		if len(args) != 0 {
			return nil, fmt.Errorf("list takes no arguments")
		}
		return []byte("{}"), nil
	case "runs":
		id := *f.id
		if id == "" && len(args) == 1 {
			id = args[0]
		}
		if id == "" || len(args) > 1 {
			return nil, fmt.Errorf("runs needs --id JOBID")
		}
		return json.Marshal(map[string]any{"jobId": id, "limit": *f.limit})
	case "add":
		if len(args) != 0 {
			return nil, fmt.Errorf("add takes flags only (flags go before arguments; got %q)", args)
		}
		job, err := cronJob(f, now, true)
		if err != nil {
			return nil, err
		}
		return json.Marshal(job)
	}
	if len(args) != 1 {
		return nil, fmt.Errorf("%s needs the job id (sessionbus cron list shows them)", op)
	}
	if op != "edit" {
		return json.Marshal(map[string]any{"jobId": args[0]})
	}
	patch, err := cronJob(f, now, false)
	if err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return nil, fmt.Errorf("edit needs at least one flag to change")
	}
	return json.Marshal(map[string]any{"jobId": args[0], "patch": patch})
}

// cronJob is the job (add) or patch (edit) the flags describe, in
// OpenClaw's cron.add shape; only flags that were set count.
func cronJob(f cronCmdFlags, now time.Time, add bool) (map[string]any, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	job := map[string]any{}
	str := func(flagName, field string, v *string) {
		if set[flagName] {
			job[field] = *v
		}
	}
	str("name", "name", f.name)
	str("description", "description", f.desc)
	str("agent", "agentId", f.agent)
	str("wake", "wakeMode", f.wake)
	str("session", "sessionTarget", f.session)
	kinds := 0
	for _, k := range []string{"at", "every", "cron"} {
		if set[k] {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, fmt.Errorf("give one of --at, --every and --cron")
	}
	switch {
	case set["at"]:
		at := *f.at
		if d, err := time.ParseDuration(at); err == nil && d > 0 {
			at = now.Add(d).UTC().Truncate(time.Second).Format(time.RFC3339)
		}
		job["schedule"] = map[string]any{"kind": cronspec.KindAt, "at": at, "tz": *f.tz}
	case set["every"]:
		ms, err := cronspec.ParseEvery(*f.every)
		if err != nil {
			return nil, err
		}
		job["schedule"] = map[string]any{"kind": cronspec.KindEvery, "everyMs": ms}
	case set["cron"]:
		job["schedule"] = map[string]any{"kind": cronspec.KindCron, "expr": *f.expr, "tz": *f.tz}
	case set["tz"]:
		return nil, fmt.Errorf("--tz goes with --cron or --at")
	}
	if set["message"] && set["system-event"] {
		return nil, fmt.Errorf("give --message (isolated turn) or --system-event (main session), not both")
	}
	if set["message"] {
		job["payload"] = map[string]any{"kind": "agentTurn", "message": *f.message, "timeoutSeconds": *f.timeoutSeconds}
	}
	if set["system-event"] {
		job["payload"] = map[string]any{"kind": "systemEvent", "text": *f.text}
	}
	if set["announce"] && set["no-deliver"] {
		return nil, fmt.Errorf("give --announce or --no-deliver, not both")
	}
	switch {
	case set["no-deliver"]:
		job["delivery"] = map[string]any{"mode": "none"}
	case set["announce"], set["channel"], set["to"], set["best-effort-deliver"]:
		job["delivery"] = map[string]any{"mode": "announce", "channel": *f.channel, "to": *f.to, "bestEffort": *f.bestEffort}
	}
	if set["delete-after-run"] && set["keep-after-run"] {
		return nil, fmt.Errorf("give --delete-after-run or --keep-after-run, not both")
	}
	if set["delete-after-run"] || set["keep-after-run"] {
		job["deleteAfterRun"] = set["delete-after-run"]
	}
	if add {
		job["enabled"] = !*f.disabled
	} else if set["disabled"] {
		return nil, fmt.Errorf("edit does not take --disabled: use sessionbus cron disable JOBID")
	}
	return job, nil
}

// printCronList prints the jobs as a table: id, name, schedule, target,
// next tick, last run and its outcome.
func printCronList(reply []byte, stdout, stderr io.Writer) int {
	var res struct {
		Jobs []struct {
			ID            string `json:"id"`
			Name          string `json:"name"`
			AgentID       string `json:"agentId"`
			Enabled       bool   `json:"enabled"`
			SessionTarget string `json:"sessionTarget"`
			Schedule      struct {
				Kind, At, Expr, Tz string
				EveryMs            int64 `json:"everyMs"`
			} `json:"schedule"`
			NextRunAtMs int64 `json:"nextRunAtMs"`
			State       struct {
				LastRunAtMs int64  `json:"lastRunAtMs"`
				LastStatus  string `json:"lastStatus"`
			} `json:"state"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	if len(res.Jobs) == 0 {
		fmt.Fprintln(stderr, "no cron jobs (sessionbus cron add creates one)")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tAGENT\tSCHEDULE\tTARGET\tENABLED\tNEXT\tLAST\tSTATUS")
	at := func(ms int64) string {
		if ms == 0 {
			return "-"
		}
		return time.UnixMilli(ms).UTC().Format(time.RFC3339)
	}
	for _, j := range res.Jobs {
		sched := j.Schedule.Kind + " " + j.Schedule.At + j.Schedule.Expr
		if j.Schedule.Kind == cronspec.KindEvery {
			sched = "every " + (time.Duration(j.Schedule.EveryMs) * time.Millisecond).String()
		}
		if j.Schedule.Tz != "" {
			sched += " (" + j.Schedule.Tz + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\n", j.ID, j.Name, j.AgentID, sched, j.SessionTarget,
			j.Enabled, at(j.NextRunAtMs), at(j.State.LastRunAtMs), rulesOr(j.State.LastStatus, "-"))
	}
	_ = tw.Flush()
	return 0
}

func rulesOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
