package main

import (
	"io"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/ops/audit"
)

func cmdAudit(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("audit", stderr)
	server := fs.String("server", defaultServer(), "NATS server URL")
	creds := fs.String("creds", defaultCreds(), "credentials file to connect with (its NATS user, if it has one); any role will do")
	cfgPath := fs.String("config", "", "config file (default: ./sessionbus.yaml or .json if present)")
	data := fs.String("data", defaultData(), "serve's data dir: the credentials, NATS keys and store whose permissions are checked")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*cfgPath, newLogger(stderr, "warn"))
	if err != nil {
		_ = failLine(stderr, "audit", err)
		return 2
	}
	report := audit.Run(&audit.Target{Config: cfg, DataDir: *data, CredsPath: *creds, Probe: audit.Dial(*server, *creds)})
	if *asJSON {
		printJSON(stdout, report)
	} else {
		report.WriteText(stdout)
	}
	if report.Summary.High > 0 {
		return 1
	}
	return 0
}
