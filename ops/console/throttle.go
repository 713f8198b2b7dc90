package console

import (
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/nats-io/jwt/v2"
)

// Failed logins back off per source address and per user. A credentials
// file and a token are signed, so they cannot be guessed; what the back-off
// bounds is the cost of refused attempts (each credentials login opens a
// NATS connection to be checked) and the noise they make. Per source and
// per user, not overall, so one address hammering does not lock out the
// others, and an address cannot wear a user's allowance down faster by
// switching users.
const (
	// loginFreeFromSource is larger than loginFreeForUser: one address is
	// everyone behind a NAT or a reverse proxy.
	loginFreeFromSource = 10
	loginFreeForUser    = 5
	// loginFirstWait is the wait after the last free failure; each further
	// failure doubles it, up to loginMaxWait.
	loginFirstWait = time.Second
	loginMaxWait   = 5 * time.Minute
	// loginForgetAfter is how long after its last failure a source or user
	// starts over; longer than loginMaxWait, so waiting out the longest
	// back-off does not by itself wipe the count.
	loginForgetAfter = 15 * time.Minute
	// loginTracked caps the sources and the users tracked (each): beyond
	// it the one whose last failure is oldest is forgotten, so an attacker
	// with many addresses costs bounded memory.
	loginTracked = 10_000
)

type failures struct {
	n     int
	last  time.Time // the latest failure
	until time.Time // no attempt before this
}

// backoff counts failed logins per key and says how long a key must wait.
type backoff struct {
	free int
	mu   sync.Mutex
	seen *simplelru.LRU[string, *failures]
}

func newBackoff(free, tracked int) *backoff {
	seen, err := simplelru.NewLRU[string, *failures](tracked, nil)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &backoff{free: free, seen: seen}
}

// wait is how long key must still wait before its next attempt (0: none).
// The empty key (no user claimed) never waits.
func (b *backoff) wait(key string, now time.Time) time.Duration {
	if key == "" {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.seen.Peek(key)
	if !ok || now.Sub(f.last) >= loginForgetAfter {
		return 0
	}
	return max(f.until.Sub(now), 0)
}

// failed counts a failure of key; after free of them, the key waits
// loginFirstWait, doubled for each further failure. It returns the wait it
// set (0: none).
func (b *backoff) failed(key string, now time.Time) time.Duration {
	if key == "" {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	f, ok := b.seen.Get(key)
	if !ok || now.Sub(f.last) >= loginForgetAfter {
		f = &failures{}
		b.seen.Add(key, f)
	}
	f.n++
	f.last = now
	if over := f.n - b.free; over >= 0 {
		d := loginMaxWait
		if over < 20 { // 1s<<20 is past loginMaxWait already
			d = min(loginFirstWait<<over, loginMaxWait)
		}
		f.until = now.Add(d)
		return d
	}
	return 0
}

// succeeded starts key over.
func (b *backoff) succeeded(key string) {
	if key == "" {
		return
	}
	b.mu.Lock()
	b.seen.Remove(key)
	b.mu.Unlock()
}

// expire drops the keys forgotten by now, oldest first (the LRU is in
// order of last failure), so memory shrinks once an attack stops.
func (b *backoff) expire(now time.Time) {
	for {
		k, f, ok := b.seen.GetOldest()
		if !ok || now.Sub(f.last) < loginForgetAfter {
			return
		}
		b.seen.Remove(k)
	}
}

func (b *backoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen.Len()
}

// loginThrottle is the console's two back-offs.
type loginThrottle struct {
	sources, users *backoff
}

func newLoginThrottle() *loginThrottle {
	return &loginThrottle{sources: newBackoff(loginFreeFromSource, loginTracked), users: newBackoff(loginFreeForUser, loginTracked)}
}

// sourceOf is the address a request came from: the peer of the connection.
// Forwarding headers are not read, since anyone can set them; behind a
// reverse proxy every login shares the proxy's address.
func sourceOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// claimedUser is the user a login names, before anything about it is
// checked: a credentials file's user (its JWT subject, the user's public
// key), or a token's session. "" when the login names none it can be
// known by, which only the source's back-off then counts. It is a digest:
// the subject is the attacker's to choose, as long as a login may be, and
// a tracked key must stay small.
func claimedUser(req loginRequest) string {
	var user string
	switch {
	case strings.TrimSpace(req.Creds) != "":
		if tok, err := jwt.ParseDecoratedJWT([]byte(req.Creds)); err == nil {
			if uc, err := jwt.DecodeUserClaims(tok); err == nil && uc.Subject != "" {
				user = "creds\x00" + uc.Subject
			}
		}
	case strings.TrimSpace(req.Token) != "":
		if gc, err := jwt.DecodeGeneric(strings.TrimSpace(req.Token)); err == nil && gc.Subject != "" {
			user = "token\x00" + gc.Subject
		}
	}
	if user == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(user))
	return string(sum[:])
}

// now is the back-off's clock.
func (s *Server) now() time.Time {
	if s.o.Now != nil {
		return s.o.Now()
	}
	return time.Now()
}
