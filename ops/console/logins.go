package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Logins and sign-in links live in a bucket of their own, so a console
// that restarts (or a second console on the same bus) knows the logins
// the first one made, and a link is used once whichever console takes
// it. A key is the SHA-256 of the secret the browser holds (the cookie,
// the link's token), never the secret: whoever reads the bucket cannot
// log in with what it finds there. The bucket's TTL is a login's
// lifetime, so an entry nobody deletes goes by itself.

// LoginsBucket is the bucket's name under the subject prefix.
func LoginsBucket(names bus.Names) string { return names.Bucket("consolelogins") }

// DefaultLinkTTL is how long a sign-in link may be used.
const DefaultLinkTTL = 10 * time.Minute

// stored is one bucket entry: a login, or a sign-in link not used yet.
type stored struct {
	Kind    string `json:"kind"` // "login" or "link"
	Name    string `json:"user"`
	Role    string `json:"role"`
	Token   string `json:"token,omitempty"`
	Session string `json:"session,omitempty"`
	Expires int64  `json:"expiresMs"`
}

type logins struct {
	// kv is nil only in tests of the login checks, which keep logins in
	// memory
	kv  jetstream.KeyValue
	now func() time.Time
	log *slog.Logger
	// mu guards the cache of the logins this console has read or made,
	// so a page's requests cost a map look-up
	mu sync.Mutex
	m  map[string]*User
}

func openLogins(ctx context.Context, js jetstream.JetStream, names bus.Names, now func() time.Time, log *slog.Logger) (*logins, error) {
	kv, _, err := bus.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      LoginsBucket(names),
		Description: "sessionbus console logins and sign-in links",
		History:     1,
		Storage:     jetstream.FileStorage,
		TTL:         loginTTL,
	})
	if err != nil {
		return nil, err
	}
	return newLogins(kv, now, log), nil
}

func newLogins(kv jetstream.KeyValue, now func() time.Time, log *slog.Logger) *logins {
	return &logins{kv: kv, now: now, log: log, m: map[string]*User{}}
}

func secretKey(kind, secret string) string {
	h := sha256.Sum256([]byte(secret))
	return kind + "." + hex.EncodeToString(h[:])
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// add stores a login of u and returns its id, the cookie's value.
func (l *logins) add(ctx context.Context, u *User) (string, error) {
	id := newSecret()
	v, _ := json.Marshal(stored{Kind: "login", Name: u.Name, Role: u.Role, Token: u.Token, Session: u.Session, Expires: u.expires.UnixMilli()})
	if l.kv != nil {
		if _, err := l.kv.Put(ctx, secretKey("login", id), v); err != nil {
			return "", fmt.Errorf("the console could not store the login (%v): try again in a moment", err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for k, v := range l.m {
		if now.After(v.expires) {
			delete(l.m, k)
		}
	}
	l.m[id] = u
	return id, nil
}

// get is the user of login id, nil when there is none or it expired.
func (l *logins) get(ctx context.Context, id string) *User {
	if id == "" {
		return nil
	}
	l.mu.Lock()
	u := l.m[id]
	l.mu.Unlock()
	if u == nil && l.kv != nil {
		e, err := l.kv.Get(ctx, secretKey("login", id))
		if err != nil {
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				l.log.Warn("console: could not read a login", "err", err)
			}
			return nil
		}
		var s stored
		if json.Unmarshal(e.Value(), &s) != nil || s.Kind != "login" {
			return nil
		}
		u = &User{Name: s.Name, Role: s.Role, Token: s.Token, Session: s.Session, expires: time.UnixMilli(s.Expires)}
		l.mu.Lock()
		l.m[id] = u
		l.mu.Unlock()
	}
	if u == nil {
		return nil
	}
	if l.now().After(u.expires) {
		l.remove(ctx, id)
		return nil
	}
	return u
}

func (l *logins) remove(ctx context.Context, id string) {
	l.mu.Lock()
	delete(l.m, id)
	l.mu.Unlock()
	if l.kv == nil {
		return
	}
	if err := l.kv.Delete(ctx, secretKey("login", id)); err != nil {
		l.log.Warn("console: could not delete a login", "err", err)
	}
}

// addLink stores a sign-in link for a user of role and returns its token.
func (l *logins) addLink(ctx context.Context, name, role string, ttl time.Duration) (string, error) {
	tok := newSecret()
	v, _ := json.Marshal(stored{Kind: "link", Name: name, Role: role, Expires: l.now().Add(ttl).UnixMilli()})
	if _, err := l.kv.Create(ctx, secretKey("link", tok), v); err != nil {
		return "", fmt.Errorf("store the sign-in link: %w", err)
	}
	return tok, nil
}

// errLinkUsed is a link that was used, expired or never made.
var errLinkUsed = errors.New("this sign-in link was used already, expired or is not this console's: ask for a new one (sessionbus console --open)")

// takeLink uses up sign-in link tok: the delete is conditional on the
// revision read, so of two browsers (or consoles) taking the same link
// exactly one gets it.
func (l *logins) takeLink(ctx context.Context, tok string) (*User, error) {
	key := secretKey("link", tok)
	e, err := l.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, errLinkUsed
	}
	if err != nil {
		return nil, fmt.Errorf("the console could not read the link (%v): try again in a moment", err)
	}
	if err := l.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil {
		return nil, errLinkUsed
	}
	var s stored
	if json.Unmarshal(e.Value(), &s) != nil || s.Kind != "link" || l.now().After(time.UnixMilli(s.Expires)) {
		return nil, errLinkUsed
	}
	return &User{Name: s.Name, Role: s.Role}, nil
}

// SignInLink makes a one-time link that logs a browser in as a user of
// role (RoleAdmin or RoleViewer, "ops" taken for the latter) for ttl (0:
// DefaultLinkTTL), so nobody pastes a credentials file. On a bus without
// auth there is no login, and the link is the console's address.
func (s *Server) SignInLink(ctx context.Context, role string, ttl time.Duration) (string, error) {
	if !s.o.Auth {
		return s.URL(), nil
	}
	switch role {
	case RoleAdmin:
	case RoleViewer, "ops":
		role = RoleViewer
	default:
		return "", fmt.Errorf("a sign-in link is for role admin (to act) or ops (to look), not %q", role)
	}
	if ttl <= 0 {
		ttl = DefaultLinkTTL
	}
	name := "admin (sign-in link)"
	if role == RoleViewer {
		name = "ops (sign-in link)"
	}
	tok, err := s.logins.addLink(ctx, name, role, ttl)
	if err != nil {
		return "", err
	}
	return s.URL() + "signin?t=" + tok, nil
}

// handleSignIn takes a sign-in link: once, before it expires, and then
// sends the browser to the console with its login cookie (the link's
// token leaves the address bar with the redirect).
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if !s.o.Auth {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	now, src := s.now(), sourceOf(r)
	if d := s.throttle.sources.wait(src, now); d > 0 {
		tooManyLogins(w, d, "from this address")
		return
	}
	u, err := s.logins.takeLink(r.Context(), r.URL.Query().Get("t"))
	if err != nil {
		s.throttle.sources.failed(src, now)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, err.Error())
		return
	}
	if !s.startLogin(w, r, u) {
		return
	}
	s.log.Info("console: signed in with a link", "user", u.Name, "role", u.Role)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
