package auth

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
)

// RunUsers gives each agent run a NATS user of its own, so a process a
// gateway starts holds credentials that end with its run: a file copied out
// of one run is refused once that run is over, and no two runs share an
// inbox. A run's user is revoked in its account's JWT, which push hands to
// the servers; its JWT's expiry is the backstop when a revocation never
// happens (the process holding RunUsers died).
//
// One RunUsers per account and process: the revocation list lives here, and
// a second one would push a list without the first one's entries.
type RunUsers struct {
	d      *Deployment
	acct   *account
	prefix string
	push   func(accountJWT string) error
	now    func() time.Time // the clock the list is pruned by; tests move it

	// pushMu makes each push one read-modify-push of the account's claims:
	// two lists built side by side and pushed in either order would each
	// drop the other's new entry. A push takes every entry added before
	// it, so revocations that queue behind one push share the next.
	pushMu sync.Mutex
	pushed uint64 // the last entry (by added) a push got to the server

	mu      sync.Mutex         // guards the list; held only to change or copy it
	revoked jwt.RevocationList // user public key -> revoked at (Unix seconds)
	expires map[string]int64   // user public key -> when its JWT expires
	added   uint64             // entries added so far
}

// RunUsers is the per-run user issuer of account acct, for a deployment
// with subject prefix; push applies an account JWT to every server that
// trusts the account (embedded.Server.UpdateAccount for serve's own).
func (d *Deployment) RunUsers(acct, prefix string, push func(accountJWT string) error) (*RunUsers, error) {
	a := d.accounts[acct]
	if a == nil {
		return nil, fmt.Errorf("no account %q in this deployment (have %s)", acct, strings.Join(d.Accounts(), ", "))
	}
	if push == nil {
		return nil, errors.New("run users need a way to push account updates to the server")
	}
	return &RunUsers{d: d, acct: a, prefix: prefix, push: push, now: time.Now,
		revoked: jwt.RevocationList{}, expires: map[string]int64{}}, nil
}

// Issue mints the NATS user of run runID: the agent role's permissions, an
// inbox of its own, a JWT that expires after ttl. It returns the user's
// credentials file and inbox prefix, and revoke, which ends the user at
// once: the server closes its connections and refuses new ones. Calling
// revoke again does nothing and returns the first call's error.
func (r *RunUsers) Issue(runID string, ttl time.Duration) (creds []byte, inbox string, revoke func() error, err error) {
	if ttl <= 0 {
		return nil, "", nil, fmt.Errorf("run user of %s: lifetime %v must be positive", runID, ttl)
	}
	u, err := r.d.Mint(r.acct.name, RoleAgent, "run "+runID, r.prefix, ttl)
	if err != nil {
		return nil, "", nil, err
	}
	if creds, err = u.Creds(); err != nil {
		return nil, "", nil, err
	}
	var once sync.Once
	var rerr error
	revoke = func() error {
		once.Do(func() { rerr = r.revoke(u.Pub, u.Expires) })
		return rerr
	}
	return creds, u.Inbox, revoke, nil
}

// Revoke ends any user of the account at once (a leaked credentials file):
// the server closes its connections and refuses new ones, and so does every
// check that asks the server, such as the console's login. expires is when
// the user's JWT expires (Unix seconds, 0 for never): the entry is kept
// until then.
func (r *RunUsers) Revoke(userPub string, expires int64) error {
	if expires == 0 {
		expires = math.MaxInt64
	}
	return r.revoke(userPub, expires)
}

// revoke adds user pub (whose JWT expires at expires) to the account's
// revocations and pushes the account, unless a push that started after the
// entry was added got it there already. Entries of users whose JWTs have
// expired go first: the server refuses an expired JWT by itself and closes
// its connections when it expires, so the list only holds users that could
// still connect and stays as long as the runs of one run timeout.
func (r *RunUsers) revoke(pub string, expires int64) error {
	r.mu.Lock()
	now := r.now().Unix()
	for k, exp := range r.expires {
		if exp < now {
			delete(r.expires, k)
			delete(r.revoked, k)
		}
	}
	// revoked "at now": every JWT of this key was issued before, and the
	// key is the run's alone
	r.revoked[pub] = now
	r.expires[pub] = expires
	r.added++
	mine := r.added
	r.mu.Unlock()

	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	if r.pushed >= mine {
		return nil // a push that started after this entry was added
	}
	r.mu.Lock()
	ac := r.d.accountClaims(r.acct)
	ac.Revocations = maps.Clone(r.revoked)
	upto := r.added
	r.mu.Unlock()
	tok, err := ac.Encode(r.d.operator)
	if err == nil {
		err = r.push(tok)
	}
	if err != nil {
		// the entry stays: the next push takes it again
		return fmt.Errorf("revoke the run's NATS user %s (it stays valid until its JWT expires): %w", pub, err)
	}
	r.pushed = upto
	return nil
}

// Revoked is how many users the account's revocation list holds now.
func (r *RunUsers) Revoked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.revoked)
}
