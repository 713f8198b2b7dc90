package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// deployLockFile, in a data dir, serializes the processes of one
// deployment that create its keys and write its credentials files: the
// nodes of a cluster started together (service units start in parallel)
// would otherwise each create their own keys, or write the same file at
// once.
const deployLockFile = "deploy.lock"

// withDeployLock runs f holding the data dir's deploy lock, waiting up to
// a minute for another process of the deployment to finish.
func withDeployLock(dataDir string, f func() error) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s is not usable: %v (pass a writable --data DIR)", dataDir, err)
	}
	l := flock.New(filepath.Join(dataDir, deployLockFile))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ok, err := l.TryLockContext(ctx, 50*time.Millisecond)
	if err != nil || !ok {
		return fmt.Errorf("data dir %s: another process of this deployment holds %s for over a minute (%v): stop it and start again", dataDir, deployLockFile, err)
	}
	defer func() { _ = l.Unlock() }()
	return f()
}

// clusterDeployment loads (or first creates) the token key and, with
// auth, the deployment's NATS keys, under the deploy lock.
func clusterDeployment(dataDir string, authOn bool) (d *auth.Deployment, op *bus.Operator, err error) {
	err = withDeployLock(dataDir, func() error {
		if authOn {
			if d, err = loadDeployment(dataDir); err != nil {
				return err
			}
		}
		op, err = bus.LoadOrCreateOperator(dataDir)
		return err
	})
	return d, op, err
}

// publishDeployment writes, under the deploy lock, what the processes and
// clients of a deployment read from its data dir: each role's credentials
// file (with auth) and the client config naming urls.
func publishDeployment(dataDir, urls, by, prefix string, d *auth.Deployment, op *bus.Operator) error {
	return withDeployLock(dataDir, func() error {
		if d != nil {
			if err := writeRoleCreds(d, dataDir, prefix, op); err != nil {
				return err
			}
		}
		return writeClientConfig(dataDir, urls, by, d != nil)
	})
}
