package demo

import (
	"context"
	"fmt"
	"time"
)

// demoJob is the cron job the demo schedules (once per data dir).
const demoJob = "demo pulse"

// cronScenario schedules one job, every 30 s, an isolated turn whose
// reply stays internal, and shows its first run: the newcomer sees it
// tick in `sessionbus cron list` and, as a cron session, in the console.
func cronScenario(ctx context.Context, o Options) error {
	w, svc := o.Out, o.Deps.Cron
	if svc == nil {
		return nil
	}
	jobs, err := svc.List(ctx)
	if err != nil {
		return err
	}
	id := ""
	for _, j := range jobs {
		if j.Name == demoJob {
			id = j.ID
		}
	}
	fmt.Fprintf(w, "\n== a scheduled turn: OpenClaw's cron job, fired by the NATS server's message scheduler\n$ %s cron add --name %q --every 30s --message \"Anything need me?\" --no-deliver\n", o.Cmd, demoJob)
	if id == "" {
		j, err := svc.Add(ctx, []byte(`{"name":"`+demoJob+`","schedule":{"kind":"every","everyMs":30000},`+
			`"payload":{"kind":"agentTurn","message":"Anything need me?"},"delivery":{"mode":"none"}}`))
		if err != nil {
			return fmt.Errorf("demo cron job: %w", err)
		}
		id = j.ID
		fmt.Fprintf(w, "job %s scheduled; it runs every 30 s in agent:main:cron:%s:run:<runId>\n", id, id)
	} else {
		fmt.Fprintf(w, "job %s is already scheduled in this data dir\n", id)
	}
	// run it once now (cron run) rather than wait up to 30 s for a tick
	fmt.Fprintf(w, "$ %s cron run %s\n", o.Cmd, id)
	runID, err := svc.RunNow(ctx, id)
	if err != nil {
		return fmt.Errorf("demo cron run: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if rec, err := o.Deps.Runs.Wait(wctx, runID); err == nil && rec.Terminal() {
		fmt.Fprintf(w, "run %s: %s (%q)\n", runID, rec.Status, rec.Reply)
	} else {
		fmt.Fprintf(w, "run %s queued; `%s cron runs --id %s` shows its outcome\n", runID, o.Cmd, id)
	}
	fmt.Fprintf(w, "  %[1]s cron list\n  %[1]s cron runs --id %[2]s\n  %[1]s cron disable %[2]s\n", o.Cmd, id)
	return nil
}
