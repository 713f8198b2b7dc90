package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// Roles a console user has. An admin may act (kill, steer, chat); a viewer
// only looks.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

const (
	cookieName = "sb_console"
	// actionHeader must be on every request that changes something: a
	// browser sends a custom header cross-site only after a CORS preflight,
	// which the console never answers, so another site cannot make a
	// logged-in browser act.
	actionHeader = "X-Sessionbus-Console"
	loginTTL     = 12 * time.Hour
	maxLogin     = 64 << 10
)

// User is one logged-in console user.
type User struct {
	Name string `json:"user"`
	Role string `json:"role"`
	// Token is set for a login with a caller token: the user sees what
	// that session may see, through the tools.
	Token   string `json:"-"`
	Session string `json:"session,omitempty"`
	expires time.Time
}

// CanAct reports whether the user may kill, steer and chat.
func (u *User) CanAct() bool { return u.Role == RoleAdmin }

// localUser is everyone's user when the bus runs without auth (the console
// then listens on loopback only).
var localUser = &User{Name: "local", Role: RoleAdmin}

type ctxKey struct{}

func userOf(r *http.Request) *User { u, _ := r.Context().Value(ctxKey{}).(*User); return u }

// current is the request's user, nil when it has not logged in.
func (s *Server) current(r *http.Request) *User {
	if !s.o.Auth {
		return localUser
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	return s.logins.get(r.Context(), c.Value)
}

// viewer lets in any logged-in user.
func (s *Server) viewer(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := s.current(r)
		if u == nil {
			writeError(w, http.StatusUnauthorized, "log in first")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, u)))
	})
}

// actor lets in users who may act, on requests that carry the action
// header; the page hides the controls from the others, and this refuses
// them whatever the page does.
func (s *Server) actor(h http.HandlerFunc) http.Handler {
	return s.viewer(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(actionHeader) == "" {
			writeError(w, http.StatusForbidden, "missing the "+actionHeader+" header: actions come from the console's page")
			return
		}
		if u := userOf(r); !u.CanAct() {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s logged in read-only (%s): kill, steer, chat, delete and restore need an admin login", u.Name, u.Role))
			return
		}
		h(w, r)
	})
}

type loginRequest struct {
	Creds string `json:"creds"`
	Token string `json:"token"`
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if !s.o.Auth {
		writeJSON(w, http.StatusOK, map[string]any{"user": localUser.Name, "role": localUser.Role, "auth": false})
		return
	}
	now, src := s.now(), sourceOf(r)
	// refused before the body is read: a blocked source costs nothing more
	if d := s.throttle.sources.wait(src, now); d > 0 {
		tooManyLogins(w, d, "from this address")
		return
	}
	var req loginRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLogin)).Decode(&req); err != nil {
		s.throttle.sources.failed(src, now)
		writeError(w, http.StatusBadRequest, "send {\"creds\": FILE TEXT} or {\"token\": TOKEN}")
		return
	}
	user := claimedUser(req)
	if d := s.throttle.users.wait(user, now); d > 0 {
		tooManyLogins(w, d, "for this user")
		return
	}
	var u *User
	var err error
	switch {
	case strings.TrimSpace(req.Creds) != "":
		u, err = s.credsUser(r.Context(), []byte(req.Creds))
	case strings.TrimSpace(req.Token) != "":
		u, err = s.tokenUser(strings.TrimSpace(req.Token))
	default:
		err = errors.New("paste a credentials file (sessionbus creds admin|ops) or a token (sessionbus token --as KEY)")
	}
	if err != nil {
		if d := s.throttle.sources.failed(src, now); d > 0 {
			s.log.Warn("console logins from an address back off", "source", src, "wait", d)
		}
		if d := s.throttle.users.failed(user, now); d > 0 {
			s.log.Warn("console logins for a user back off", "wait", d)
		}
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	s.throttle.sources.succeeded(src)
	s.throttle.users.succeeded(user)
	if !s.startLogin(w, r, u) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": u.Name, "role": u.Role, "session": u.Session, "auth": true})
}

// startLogin stores a login of u and sets its cookie.
func (s *Server) startLogin(w http.ResponseWriter, r *http.Request, u *User) bool {
	u.expires = s.now().Add(loginTTL)
	id, err := s.logins.add(r.Context(), u)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: int(loginTTL.Seconds())})
	return true
}

// tooManyLogins refuses a login during a back-off, with the wait in whole
// seconds (rounded up) in Retry-After and the message.
func tooManyLogins(w http.ResponseWriter, d time.Duration, whose string) {
	secs := int64((d + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed logins %s: try again in %ds", whose, secs))
}

// credsUser checks a credentials file as the NATS server checks a
// connection, because the console lets in whoever the file names: the user
// JWT must be issued by this deployment's account (its key or one of its
// signing keys), trusted by the operator, not expired and not revoked, and
// the file must hold the user's seed. The JWT's own fields (issuer account,
// role tags) are the signer's word, and the account's public key is in
// every file the deployment hands out, so nothing the file says about
// itself is taken until the server has accepted a connection made with it.
func (s *Server) credsUser(ctx context.Context, data []byte) (*User, error) {
	tok, err := jwt.ParseDecoratedJWT(data)
	if err != nil || !strings.HasPrefix(tok, "eyJ") {
		return nil, errors.New("that is not a credentials file: mint one with `sessionbus creds admin` or `sessionbus creds ops`")
	}
	// DecodeUserClaims verifies the signature, but against the Issuer the
	// JWT names: that only proves someone holding that key signed it.
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return nil, fmt.Errorf("the credentials' user JWT does not decode: %v", err)
	}
	issuer := uc.Issuer
	if uc.IssuerAccount != "" {
		issuer = uc.IssuerAccount
	}
	if s.o.Account == "" || issuer != s.o.Account {
		return nil, errors.New("these credentials belong to another deployment or account")
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return nil, errors.New("the credentials file holds no user seed")
	}
	if pub, _ := kp.PublicKey(); pub != uc.Subject {
		return nil, errors.New("the credentials' seed is not the user's")
	}
	if uc.Expires > 0 && time.Unix(uc.Expires, 0).Before(time.Now()) {
		return nil, errors.New("these credentials expired: mint new ones with `sessionbus creds ROLE`")
	}
	var role auth.Role
	for _, t := range uc.Tags {
		if v, ok := strings.CutPrefix(t, "role:"); ok {
			role = auth.Role(v)
		}
	}
	if role != auth.RoleAdmin && role != auth.RoleOps {
		return nil, fmt.Errorf("credentials of the %q role cannot log in: use the admin role's (to act) or the ops role's (to look)", role)
	}
	seed, _ := kp.Seed()
	if err := s.serverAccepts(ctx, tok, string(seed)); err != nil {
		return nil, err
	}
	name := uc.Name
	if name == "" {
		name = uc.Subject[:12]
	}
	if role == auth.RoleAdmin {
		return &User{Name: name, Role: RoleAdmin}, nil
	}
	return &User{Name: name, Role: RoleViewer}, nil
}

// loginCheckTimeout bounds the connection a login makes to the server.
const loginCheckTimeout = 10 * time.Second

// serverAccepts connects to the console's own server as the user (userJWT,
// seed) and closes the connection at once. The server checks what the
// console alone cannot: that the issuer is the account or one of its
// signing keys (from the account JWT it holds), that the operator trusts
// the account, and the account's revocations as they are now. The
// connection reuses the console's address and transport (TLS, in-process)
// and nothing else of its options: no callbacks, no reconnects.
func (s *Server) serverAccepts(ctx context.Context, userJWT, seed string) error {
	base := s.o.Conn.Opts
	o := nats.GetDefaultOptions()
	o.Url = s.o.Conn.ConnectedUrl()
	if o.Url == "" {
		return errors.New("the console has lost its server connection, so it cannot check credentials now: try again in a moment")
	}
	o.Name = "sessionbus console login check"
	o.InProcessServer = base.InProcessServer
	o.Secure, o.TLSConfig, o.TLSCertCB, o.RootCAsCB, o.TLSHandshakeFirst = base.Secure, base.TLSConfig, base.TLSCertCB, base.RootCAsCB, base.TLSHandshakeFirst
	o.Dialer, o.CustomDialer, o.ProxyPath = base.Dialer, base.CustomDialer, base.ProxyPath
	o.AllowReconnect, o.MaxReconnect, o.RetryOnFailedConnect = false, 0, false
	o.Timeout = loginCheckTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < o.Timeout {
		o.Timeout = max(time.Until(d), time.Millisecond)
	}
	if err := nats.UserJWTAndSeed(userJWT, seed)(&o); err != nil {
		return fmt.Errorf("the credentials file cannot be used: %v", err)
	}
	nc, err := o.Connect()
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAuthExpired) ||
			strings.Contains(strings.ToLower(err.Error()), "authorization") {
			s.log.Info("console login refused by the server", "err", err)
			return errors.New("the NATS server refuses these credentials (not issued by this deployment's account, revoked or expired): mint new ones with `sessionbus creds admin` or `sessionbus creds ops`")
		}
		s.log.Warn("console login check could not reach the server", "err", err)
		return errors.New("the console could not reach its NATS server to check these credentials: try again in a moment")
	}
	nc.Close()
	return nil
}

// tokenUser checks a caller token: the user sees and reads as that
// session, through the tools, and acts on nothing.
func (s *Server) tokenUser(tok string) (*User, error) {
	c, err := s.verifier.Verify(tok)
	if err != nil {
		return nil, fmt.Errorf("the token is not valid here: %v", err)
	}
	if c.Adapter != "" || c.SessionKey == "" {
		return nil, errors.New("an adapter's token cannot log in: use a session's (sessionbus token --as KEY)")
	}
	return &User{Name: "token:" + c.SessionKey, Role: RoleViewer, Token: tok, Session: c.SessionKey}, nil
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		s.logins.remove(r.Context(), c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) handleMe(w http.ResponseWriter, r *http.Request) {
	u := s.current(r)
	if u == nil {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "log in first", "auth": s.o.Auth})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": u.Name, "role": u.Role, "session": u.Session, "auth": s.o.Auth, "canAct": u.CanAct()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": msg})
}

// AccountOf is the account of the NATS user in a credentials file (the
// key that signed it), "" when the file holds none (a bus without auth).
func AccountOf(data []byte) string {
	tok, err := jwt.ParseDecoratedJWT(data)
	if err != nil || !strings.HasPrefix(tok, "eyJ") {
		return ""
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return ""
	}
	if uc.IssuerAccount != "" {
		return uc.IssuerAccount
	}
	return uc.Issuer
}
