package bus

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// CredsFile is the operator credentials file `serve` writes into its data dir.
const CredsFile = "operator.creds"

// DefaultTokenTTL bounds how long a caller token stays valid when no TTL is given.
const DefaultTokenTTL = time.Hour

// MaxTokenTTL is the longest a caller token may be valid: Mint refuses
// more and Verify refuses a token whose lifetime is longer. Revocations are
// kept this long (kv/revocations), so no token outlives its revocation.
const MaxTokenTTL = 24 * time.Hour

// Caller is who is asking, as attested by a token signed with the operator key.
// Spawn depth, parent and role are deliberately absent: they come from the
// session store, so a token cannot claim more than the store grants.
type Caller struct {
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId,omitempty"`
	RunID      string `json:"runId,omitempty"`
	Sandboxed  bool   `json:"sandboxed,omitempty"`
	// Sender is who sent the human message a run answers, on its channel:
	// the group tool policy's toolsBySender is matched on it.
	Sender string `json:"sender,omitempty"`
	// Adapter marks a channel adapter's token: it speaks for no session and
	// may only bring human turns in (Names.Inbound), on the channel it names
	// or, with AnyChannel, on every channel. A tool call with it is refused,
	// as is an inbound turn with a session's token.
	Adapter string    `json:"adapter,omitempty"`
	Expires time.Time `json:"-"`
	// Minted is when the token was signed (microseconds; zero for tokens
	// minted before this claim existed): a run's revocation refuses the
	// tokens minted up to it, and a retry's new tokens pass.
	Minted time.Time `json:"-"`
}

// AnyChannel is the adapter claim of a token valid for every channel.
const AnyChannel = "*"

// channelRe is a channel id as adapters and deliveries name it: lower
// case, usable as one subject token (Names.Deliver).
var channelRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// NormalizeChannel lower-cases and trims a channel id and checks it is
// one: 1 to 64 of [a-z0-9_-], starting with a letter or digit.
func NormalizeChannel(ch string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(ch))
	if !channelRe.MatchString(n) {
		return "", fmt.Errorf("channel %q is not a channel id: use 1 to 64 of a-z, 0-9, '_' and '-', starting with a letter or digit (e.g. telegram)", ch)
	}
	return n, nil
}

// AllowsChannel reports whether an adapter caller may bring turns in on
// channel (already normalized).
func (c Caller) AllowsChannel(channel string) bool {
	return c.Adapter != "" && (c.Adapter == AnyChannel || c.Adapter == channel)
}

// adapterSubject is the JWT subject of an adapter token, so the token is
// never mistaken for a session's even by a reader that ignores the claim.
const adapterSubject = "adapter:"

// Operator holds the deployment's signing key.
type Operator struct {
	kp  nkeys.KeyPair
	pub string
}

// NewOperator creates a fresh operator key pair.
func NewOperator() (*Operator, error) {
	kp, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	return operatorFromKP(kp)
}

func operatorFromKP(kp nkeys.KeyPair) (*Operator, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	if !nkeys.IsValidPublicOperatorKey(pub) {
		return nil, errors.New("credentials do not hold an operator key (seed must start with SO)")
	}
	return &Operator{kp: kp, pub: pub}, nil
}

// PublicKey is the issuer workers accept.
func (o *Operator) PublicKey() string { return o.pub }

// LoadOperator reads a credentials file written by WriteCreds.
func LoadOperator(path string) (*Operator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read operator credentials: %w (start `sessionbus serve` once, or pass --creds)", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if seed := operatorSeed(data); seed != nil {
		// with NATS auth the file starts with the NATS user's JWT and seed
		// (what a connection reads) and carries the token key after them
		kp, err = nkeys.FromSeed(seed)
	}
	if err != nil {
		return nil, fmt.Errorf("parse operator credentials %s: %w", path, err)
	}
	return operatorFromKP(kp)
}

// operatorSeed finds an operator seed line (SO...) anywhere in data.
func operatorSeed(data []byte) []byte {
	for line := range strings.Lines(string(data)) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "SO") {
			return []byte(l)
		}
	}
	return nil
}

// Seed is the operator's seed, decorated, for a credentials file that
// carries the token key after a NATS user's credentials.
func (o *Operator) Seed() ([]byte, error) {
	seed, err := o.kp.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.DecorateSeed(seed)
}

// LoadOrCreateOperator keeps one operator key per data dir, so tokens minted
// before a restart stay valid after it.
func LoadOrCreateOperator(dataDir string) (*Operator, error) {
	path := filepath.Join(dataDir, CredsFile)
	if _, err := os.Stat(path); err == nil {
		return LoadOperator(path)
	}
	op, err := NewOperator()
	if err != nil {
		return nil, err
	}
	return op, op.WriteCreds(path)
}

// WriteCreds stores the seed with mode 0600 (the file is a signing secret).
func (o *Operator) WriteCreds(path string) error {
	seed, err := o.kp.Seed()
	if err != nil {
		return err
	}
	dec, err := jwt.DecorateSeed(seed)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, dec, 0o600); err != nil {
		return fmt.Errorf("write operator credentials: %w", err)
	}
	return os.Rename(tmp, path)
}

// Mint signs a token for caller valid for ttl.
func (o *Operator) Mint(c Caller, ttl time.Duration) (string, error) {
	if c.Adapter != "" {
		return o.mintAdapter(c, ttl)
	}
	if c.SessionKey == "" {
		return "", errors.New("a token needs a session key (--as) or, for a channel adapter, a channel (--adapter)")
	}
	ttl, err := tokenTTL(ttl)
	if err != nil {
		return "", err
	}
	now := time.Now()
	gc := jwt.NewGenericClaims(c.SessionKey)
	gc.Expires = now.Add(ttl).Unix()
	gc.Data = map[string]any{"sessionKey": c.SessionKey, "mintedAt": now.UnixMicro()}
	if c.AgentID != "" {
		gc.Data["agentId"] = c.AgentID
	}
	if c.RunID != "" {
		gc.Data["runId"] = c.RunID
	}
	if c.Sandboxed {
		gc.Data["sandboxed"] = true
	}
	if c.Sender != "" {
		gc.Data["sender"] = c.Sender
	}
	return gc.Encode(o.kp)
}

// mintAdapter signs a channel adapter's token: the adapter claim only.
func (o *Operator) mintAdapter(c Caller, ttl time.Duration) (string, error) {
	if c.SessionKey != "" || c.AgentID != "" || c.RunID != "" || c.Sandboxed || c.Sender != "" {
		return "", errors.New("a token speaks for a session (--as) or for a channel adapter (--adapter), not both")
	}
	name := c.Adapter
	if name != AnyChannel {
		var err error
		if name, err = NormalizeChannel(name); err != nil {
			return "", fmt.Errorf("--adapter: %w, or * for every channel", err)
		}
	}
	ttl, err := tokenTTL(ttl)
	if err != nil {
		return "", err
	}
	now := time.Now()
	gc := jwt.NewGenericClaims(adapterSubject + name)
	gc.Expires = now.Add(ttl).Unix()
	gc.Data = map[string]any{"adapter": name, "mintedAt": now.UnixMicro()}
	return gc.Encode(o.kp)
}

// tokenTTL is ttl, DefaultTokenTTL for none, and an error above MaxTokenTTL.
func tokenTTL(ttl time.Duration) (time.Duration, error) {
	if ttl > MaxTokenTTL {
		return 0, fmt.Errorf("token lifetime %v is longer than the maximum %v: use a shorter --ttl and mint again when it runs out", ttl, MaxTokenTTL)
	}
	if ttl <= 0 {
		return DefaultTokenTTL, nil
	}
	return ttl, nil
}

// Verifier checks tokens against one operator public key. Verified tokens are
// cached until they expire: an ed25519 verify costs more than a NATS round
// trip. The cache is an LRU of verifierCacheMax entries, so a full cache
// evicts its least recently used token in O(1) instead of scanning; each
// entry expires with its token, checked on every hit. (golang-lru's
// expirable variant has one TTL for all entries and a cleanup goroutine
// that cannot be stopped.)
type Verifier struct {
	issuer  string
	now     func() time.Time
	cache   *lru.Cache[[32]byte, Caller]
	revoked atomic.Pointer[Revocations]
}

// Revocations says when a run's tokens were revoked (its end, or its
// kill); kv/revocations keeps them, watched into memory.
type Revocations interface {
	RevokedAt(runID string) (time.Time, bool)
}

// UseRevocations makes Verify refuse a run's tokens minted up to the
// run's revocation, cached or not.
func (v *Verifier) UseRevocations(r Revocations) { v.revoked.Store(&r) }

// tokenSkew is how far a verifier's clock may be behind the minting
// gateway's before a fresh token looks not yet valid or too long-lived.
const tokenSkew = time.Minute

const verifierCacheMax = 16384

// NewVerifier accepts tokens issued by issuer (an operator public key).
func NewVerifier(issuer string) *Verifier { return NewVerifierAt(issuer, time.Now) }

// NewVerifierAt is NewVerifier with a clock, for expiry tests.
func NewVerifierAt(issuer string, now func() time.Time) *Verifier {
	return newVerifier(issuer, now, verifierCacheMax)
}

func newVerifier(issuer string, now func() time.Time, size int) *Verifier {
	cache, _ := lru.New[[32]byte, Caller](size) // errors only for a size <= 0
	return &Verifier{issuer: issuer, now: now, cache: cache}
}

// Verify returns the caller a token attests, or a 401 error saying why not.
func (v *Verifier) Verify(token string) (Caller, error) {
	if token == "" {
		return Caller{}, Errorf(CodeUnauthorized, "missing %s header: mint a token with `sessionbus token --as SESSIONKEY`", HeaderToken)
	}
	h := sha256.Sum256([]byte(token))
	now := v.now()
	if c, ok := v.cache.Get(h); ok {
		if now.Before(c.Expires) {
			if err := v.checkRevoked(c); err != nil {
				return Caller{}, err
			}
			return c, nil
		}
		v.cache.Remove(h)
		return Caller{}, Errorf(CodeUnauthorized, "token expired at %s: mint a new one", c.Expires.UTC().Format(time.RFC3339))
	}
	gc, err := jwt.DecodeGeneric(token)
	if err != nil {
		return Caller{}, Errorf(CodeUnauthorized, "invalid token: %v", err)
	}
	if gc.Issuer != v.issuer {
		return Caller{}, Errorf(CodeUnauthorized, "token not issued by this deployment's operator key")
	}
	if gc.Expires == 0 {
		return Caller{}, Errorf(CodeUnauthorized, "token has no expiry: mint one with `sessionbus token`")
	}
	c := Caller{SessionKey: gc.Subject, Expires: time.Unix(gc.Expires, 0)}
	if !now.Before(c.Expires) {
		return Caller{}, Errorf(CodeUnauthorized, "token expired at %s: mint a new one", c.Expires.UTC().Format(time.RFC3339))
	}
	if gc.NotBefore != 0 && now.Add(tokenSkew).Unix() < gc.NotBefore {
		return Caller{}, Errorf(CodeUnauthorized, "token not valid before %s: use it from then, or mint one valid now", time.Unix(gc.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	if gc.IssuedAt != 0 && now.Add(tokenSkew).Unix() < gc.IssuedAt {
		return Caller{}, Errorf(CodeUnauthorized, "token issued at %s, in the future: check the minting host's clock and mint one again", time.Unix(gc.IssuedAt, 0).UTC().Format(time.RFC3339))
	}
	// The lifetime counts from now as well as from iat: a token whose iat
	// was set ahead would otherwise stay valid for MaxTokenTTL after that
	// future iat, however long before it it was used.
	if gc.IssuedAt == 0 || c.Expires.Sub(time.Unix(gc.IssuedAt, 0)) > MaxTokenTTL+tokenSkew || c.Expires.Sub(now) > MaxTokenTTL+tokenSkew {
		return Caller{}, Errorf(CodeUnauthorized, "token lifetime is longer than the maximum %v (or unknown): mint one with `sessionbus token --ttl` at most %v", MaxTokenTTL, MaxTokenTTL)
	}
	if us, ok := gc.Data["mintedAt"].(float64); ok {
		c.Minted = time.UnixMicro(int64(us))
	}
	if s, ok := gc.Data["agentId"].(string); ok {
		c.AgentID = s
	}
	if s, ok := gc.Data["runId"].(string); ok {
		c.RunID = s
	}
	if b, ok := gc.Data["sandboxed"].(bool); ok {
		c.Sandboxed = b
	}
	if s, ok := gc.Data["sender"].(string); ok {
		c.Sender = s
	}
	if s, ok := gc.Data["adapter"].(string); ok && s != "" {
		// an adapter speaks for no session, whatever else the token says
		c = Caller{Adapter: s, Expires: c.Expires, Minted: c.Minted}
	}
	v.cache.Add(h, c)
	if err := v.checkRevoked(c); err != nil {
		return Caller{}, err
	}
	return c, nil
}

// checkRevoked refuses a run's token minted up to its run's revocation.
func (v *Verifier) checkRevoked(c Caller) error {
	r := v.revoked.Load()
	if r == nil || c.RunID == "" {
		return nil
	}
	at, ok := (*r).RevokedAt(c.RunID)
	if !ok || c.Minted.After(at) {
		return nil
	}
	return Errorf(CodeUnauthorized, "token of run %s was revoked at %s (the run ended or was killed): a run's token is valid only while it runs", c.RunID, at.UTC().Format(time.RFC3339))
}
