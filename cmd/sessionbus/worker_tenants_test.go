package main

import (
	"bytes"
	"strings"
	"testing"
)

// worker --tenants-dir takes each tenant's credentials from its file: a
// --creds, --issuer or --metrics beside it is a usage error, and a dir
// without tenant files is refused saying how to make one.
func TestWorkerTenantsDirRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--tenants-dir", dir, "--creds", "x.creds"},
		{"--tenants-dir", dir, "--issuer", "OABC"},
		{"--tenants-dir", dir, "--metrics", "127.0.0.1:0"},
	} {
		var out, errb bytes.Buffer
		if code := cmdWorker(args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "drop --") {
			t.Errorf("worker %v: exit %d, stderr %q; want 2 saying which flag to drop", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := cmdWorker([]string{"--tenants-dir", dir}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "sessionbus creds --account") {
		t.Errorf("empty tenants dir: exit %d, stderr %q; want 1 saying how to mint a tenant's file", code, errb.String())
	}
}

// bench --tenants takes positive counts, and not beside --load.
func TestBenchTenantsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--tenants", "0"},
		{"--tenants", "1,x"},
		{"--tenants", "1", "--tenants-idle", "10ms"},
		{"--tenants", "1", "--load", "5s"},
	} {
		var out, errb bytes.Buffer
		if code := cmdBench(args, nil, &out, &errb); code != 2 {
			t.Errorf("bench %v: exit %d, stderr %q; want 2", args, code, errb.String())
		}
	}
}
