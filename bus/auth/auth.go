// Package auth holds a deployment's NATS identities: the NATS operator,
// its system account and one account per tenant, the roles a connection can
// have (agent, adapter, worker, gateway, ops, admin) and the subject
// permissions each role gets. Permissions live in the user JWTs, signed by the
// account key, so the server enforces them and no sessionbus process has to.
//
// This is NATS's decentralized (operator/account/user JWT) mode with a
// memory resolver: the server trusts the operator JWT and preloads the
// account JWTs; user credentials are minted offline and need no server
// reload. It is separate from the caller-token key (bus.Operator): that key
// says which session asks, these say what a connection may touch.
package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/sessionbus/sessionbus/bus"
)

// DefaultAccount is the account `serve` runs its deployment in.
const DefaultAccount = "SB"

// Dir is the directory under a data dir that holds the NATS keys.
const Dir = "nats-auth"

// Role is what a connection is for; it decides its permissions.
type Role string

// The roles. Worker, gateway and admin are the trusted tier (they hold or
// trust the caller-token key) and get the deployment's subjects; the others
// get only what their job needs.
const (
	RoleAgent   Role = "agent"   // calls tools: publish <prefix>.tools.> and <prefix>.schema, receive its own replies
	RoleAdapter Role = "adapter" // a channel adapter: the ingress subject and <prefix>.deliver.>
	RoleWorker  Role = "worker"  // tool workers
	RoleGateway Role = "gateway" // gateway replicas
	RoleOps     Role = "ops"     // read-only views of streams and buckets
	RoleAdmin   Role = "admin"   // sessionbus call/import/chat and serve's own connection
)

// Roles lists every role, for usage lines and for serve to write one file each.
var Roles = []Role{RoleAgent, RoleAdapter, RoleWorker, RoleGateway, RoleOps, RoleAdmin}

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(Roles, r) {
		return r, nil
	}
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return "", fmt.Errorf("role %q is not one of %s", s, strings.Join(names, ", "))
}

var accountNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Deployment is the NATS operator with its system account and tenant
// accounts, loaded from (or created in) one directory of seed files.
type Deployment struct {
	operator nkeys.KeyPair
	opPub    string
	system   *account
	accounts map[string]*account
}

type account struct {
	name string
	kp   nkeys.KeyPair
	pub  string
}

// LoadOrCreate reads the keys in dir, creating the operator, the system
// account and any of accounts that do not exist yet (seeds are written 0600:
// whoever reads them can mint any identity). Accounts created earlier and not
// named stay part of the deployment.
func LoadOrCreate(dir string, accounts ...string) (*Deployment, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("NATS key dir %s is not usable: %v", dir, err)
	}
	d := &Deployment{accounts: map[string]*account{}}
	var err error
	if d.operator, err = loadOrCreateKey(filepath.Join(dir, "operator.nk"), nkeys.CreateOperator); err != nil {
		return nil, err
	}
	d.opPub, _ = d.operator.PublicKey()
	if d.system, err = loadAccount(dir, "SYS"); err != nil {
		return nil, err
	}
	for _, a := range accounts {
		if !accountNameRe.MatchString(a) || a == "SYS" {
			return nil, fmt.Errorf("account name %q: use 1 to 64 of A-Z, a-z, 0-9, '_' and '-' (SYS is the system account)", a)
		}
		if d.accounts[a], err = loadAccount(dir, a); err != nil {
			return nil, err
		}
	}
	existing, _ := filepath.Glob(filepath.Join(dir, "account-*.nk"))
	for _, f := range existing {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "account-"), ".nk")
		if name == "SYS" || d.accounts[name] != nil {
			continue
		}
		if d.accounts[name], err = loadAccount(dir, name); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func loadAccount(dir, name string) (*account, error) {
	kp, err := loadOrCreateKey(filepath.Join(dir, "account-"+name+".nk"), nkeys.CreateAccount)
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	return &account{name: name, kp: kp, pub: pub}, nil
}

func loadOrCreateKey(path string, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, error) {
	if b, err := os.ReadFile(path); err == nil {
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
		if err != nil {
			return nil, fmt.Errorf("NATS key %s: %v (delete the file to create a new one, which invalidates every credentials file minted with it)", path, err)
		}
		return kp, nil
	}
	kp, err := create()
	if err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, seed, 0o600); err != nil {
		return nil, fmt.Errorf("write NATS key %s: %v", path, err)
	}
	return kp, os.Rename(tmp, path)
}

// Accounts lists the tenant account names, sorted.
func (d *Deployment) Accounts() []string {
	out := make([]string, 0, len(d.accounts))
	for n := range d.accounts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// AccountKey is the public key of tenant account name (the account's name
// inside the server, where streams are looked up), or "" when the
// deployment has no such account.
func (d *Deployment) AccountKey(name string) string {
	if a := d.accounts[name]; a != nil {
		return a.pub
	}
	return ""
}

// RouteSecret is the password a cluster's nodes present to each other on
// their routes: without one, any process that reaches a route port joins
// the cluster as a peer and sees every account's traffic. It is derived
// from the operator seed, so every node of a deployment computes the same
// one and nothing else needs to be stored or copied.
func (d *Deployment) RouteSecret() (string, error) {
	seed, err := d.operator.Seed()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte("sessionbus cluster routes\n"), seed...))
	return hex.EncodeToString(sum[:]), nil
}

// OperatorJWT is the self-signed operator JWT the server trusts; it names
// the system account.
func (d *Deployment) OperatorJWT() (string, error) {
	oc := jwt.NewOperatorClaims(d.opPub)
	oc.Name = "sessionbus"
	oc.SystemAccount = d.system.pub
	return oc.Encode(d.operator)
}

// OperatorKey is the operator's public key: the issuer of every account JWT.
func (d *Deployment) OperatorKey() string { return d.opPub }

// SystemAccount is the system account's public key.
func (d *Deployment) SystemAccount() string { return d.system.pub }

// AccountJWTs maps each account's public key (system included) to its JWT.
// Tenant accounts get JetStream without limits beyond the server's own;
// nothing is exported or imported, so accounts share no subject.
func (d *Deployment) AccountJWTs() (map[string]string, error) {
	out := map[string]string{}
	for _, a := range append([]*account{d.system}, d.accountList()...) {
		s, err := d.accountClaims(a).Encode(d.operator)
		if err != nil {
			return nil, err
		}
		out[a.pub] = s
	}
	return out, nil
}

// accountClaims are the claims of account a as the servers are given them
// at start; RunUsers adds revocations to the same claims, so an update
// changes nothing else.
func (d *Deployment) accountClaims(a *account) *jwt.AccountClaims {
	ac := jwt.NewAccountClaims(a.pub)
	ac.Name = a.name
	if a != d.system {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, DiskMaxStreamBytes: -1}
	}
	return ac
}

func (d *Deployment) accountList() []*account {
	out := make([]*account, 0, len(d.accounts))
	for _, n := range d.Accounts() {
		out = append(out, d.accounts[n])
	}
	return out
}

// ServerConfig is the nats-server configuration block that trusts this
// deployment: operator, system account, and the accounts preloaded into a
// memory resolver. `serve` applies the same settings to its embedded
// server; on a cluster every node includes this block.
func (d *Deployment) ServerConfig() (string, error) {
	op, err := d.OperatorJWT()
	if err != nil {
		return "", err
	}
	accts, err := d.AccountJWTs()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# sessionbus NATS identities (sessionbus creds --server-config)\n")
	fmt.Fprintf(&b, "operator: %s\n", op)
	fmt.Fprintf(&b, "system_account: %s\n", d.system.pub)
	fmt.Fprintf(&b, "resolver: MEMORY\n")
	fmt.Fprintf(&b, "resolver_preload: {\n")
	keys := make([]string, 0, len(accts))
	for k := range accts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %s\n", k, accts[k])
	}
	fmt.Fprintf(&b, "}\n")
	return b.String(), nil
}

// User is one minted NATS identity.
type User struct {
	JWT   string
	Seed  string
	Pub   string
	Inbox string // the inbox prefix it must use (nats.CustomInboxPrefix)
	// Expires is when the JWT expires (Unix seconds), 0 for never.
	Expires int64
}

// InboxPrefix is the only inbox a user with public key pub may subscribe
// to: replies to its requests come there and nobody else's do.
func InboxPrefix(userPub string) string { return "_INBOX." + userPub }

// Mint creates a user of role in account, named name (shown in the server's
// connection list), for a deployment with subject prefix. expiry 0 means the
// user does not expire.
func (d *Deployment) Mint(acct string, role Role, name, prefix string, expiry time.Duration) (*User, error) {
	return d.MintWith(acct, role, name, prefix, expiry, nil)
}

// MintWith is Mint with the role's permissions adjusted by edit (the
// benchmarks add their own raw subjects); nil leaves them as they are.
func (d *Deployment) MintWith(acct string, role Role, name, prefix string, expiry time.Duration, edit func(*jwt.Permissions)) (*User, error) {
	return d.mint(acct, role, "", name, prefix, expiry, edit)
}

// MintAdapter mints a channel adapter for one channel: it brings human
// turns in and reads that channel's deliveries through a consumer named for
// the channel, and reaches no other channel's deliveries or consumers
// (ChannelAdapterPermissions). An adapter minted with Mint serves every
// channel.
func (d *Deployment) MintAdapter(acct, channel, name, prefix string, expiry time.Duration) (*User, error) {
	ch, err := bus.NormalizeChannel(channel)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = "adapter-" + ch
	}
	return d.mint(acct, RoleAdapter, ch, name, prefix, expiry, nil)
}

func (d *Deployment) mint(acct string, role Role, channel, name, prefix string, expiry time.Duration, edit func(*jwt.Permissions)) (*User, error) {
	a := d.accounts[acct]
	if a == nil {
		return nil, fmt.Errorf("no account %q in this deployment (have %s): create it with `sessionbus creds --account %s --server-config` and reload the servers", acct, strings.Join(d.Accounts(), ", "), acct)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	uc := jwt.NewUserClaims(pub)
	if name == "" {
		name = string(role)
	}
	uc.Name = name
	uc.Tags.Add("role:" + string(role))
	if expiry > 0 {
		uc.Expires = time.Now().Add(expiry).Unix()
	}
	uc.Permissions = Permissions(role, bus.NewNames(prefix), InboxPrefix(pub))
	if channel != "" {
		uc.Tags.Add("channel:" + channel)
		uc.Permissions = ChannelAdapterPermissions(bus.NewNames(prefix), InboxPrefix(pub), channel)
	}
	uc.Limits.NatsLimits = Limits(role)
	if edit != nil {
		edit(&uc.Permissions)
	}
	tok, err := uc.Encode(a.kp)
	if err != nil {
		return nil, err
	}
	return &User{JWT: tok, Seed: string(seed), Pub: pub, Inbox: InboxPrefix(pub), Expires: uc.Expires}, nil
}

// ClientPayload is the largest message an agent or adapter connection may
// publish: the largest tool request (bus.MaxRequestBytes) plus room for its
// headers (the caller token). The server refuses a larger one, and closes
// the connection, before it reaches a worker: a worker would only answer
// it with 413 after reading it, and senders of such requests slowed every
// other caller's calls.
const ClientPayload = bus.MaxRequestBytes + 64<<10

// ClientSubs bounds the subscriptions of an agent or adapter connection: a
// client needs one for its replies and a few for deliveries, and an
// unbounded number costs the server memory for every one.
const ClientSubs = 256

// Limits are the per-connection limits a role's users carry: the outside
// roles (agent, adapter) are bounded; the deployment's own processes are
// not beyond the server's.
func Limits(role Role) jwt.NatsLimits {
	switch role {
	case RoleAgent, RoleAdapter:
		return jwt.NatsLimits{Subs: ClientSubs, Data: jwt.NoLimit, Payload: ClientPayload}
	default:
		return jwt.NatsLimits{Subs: jwt.NoLimit, Data: jwt.NoLimit, Payload: jwt.NoLimit}
	}
}

// Creds is the user's credentials file (the format `nats --creds` reads).
func (u *User) Creds() ([]byte, error) {
	return jwt.FormatUserConfig(u.JWT, []byte(u.Seed))
}

// Options are the connect options for this user: its JWT and its inbox.
func (u *User) Options() []nats.Option {
	return []nats.Option{nats.UserJWTAndSeed(u.JWT, u.Seed), nats.CustomInboxPrefix(u.Inbox)}
}

// Permissions is what role may publish and subscribe to, for a deployment
// whose subjects names derives, and a user whose inbox is inbox.
func Permissions(role Role, names bus.Names, inbox string) jwt.Permissions {
	var p jwt.Permissions
	own := inbox + ".>"
	switch role {
	case RoleAgent:
		// tool requests and the schema of the tools it may call; replies
		// come to its own inbox. No live output: it spans every session,
		// and an agent sees others only through its tools' visibility
		p.Pub.Allow.Add(names.ToolsGroup()+".>", names.Schema())
		p.Sub.Allow.Add(own)
	case RoleAdapter:
		// the ingress, and the outbound deliveries: live, or read from
		// their stream through a consumer of its own
		ds := names.DeliverStream()
		p.Pub.Allow.Add(names.Inbound(), "$JS.API.INFO", "$JS.API.STREAM.INFO."+ds,
			"$JS.API.CONSUMER.CREATE."+ds, "$JS.API.CONSUMER.CREATE."+ds+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+ds+".>", "$JS.API.CONSUMER.INFO."+ds+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+ds+".>", "$JS.API.CONSUMER.DELETE."+ds+".>",
			"$JS.ACK."+ds+".>", "$JS.FC."+ds+".>",
			// the deliveries it gave up on (the stream acks to its inbox)
			names.DeadLetter(">"))
		p.Sub.Allow.Add(own, names.Deliver(">"))
	case RoleOps:
		// Reads, through the ops JetStream API: `nats --js-api-prefix
		// <prefix>.ops.js`. Never $JS.API itself: the server answers a
		// request on whatever reply subject it carries and a push
		// consumer delivers wherever its creator said, and a stream
		// stores what is published on a subject it captures, whoever
		// publishes it; subject permissions see neither subject. A
		// worker passes the API on only with an inbox to answer and
		// deliver to, and only reads and new consumers (bus/opsapi).
		// No ack (an ack on the run queue would remove a run). The
		// flow-control replies of its push consumers, which nothing
		// answers or stores; and micro's monitoring requests, which the
		// workers answer only on an inbox.
		// The transcript search, which answers only on an inbox.
		p.Pub.Allow.Add(names.OpsJSAPI()+".>", "$JS.FC.>", names.Search(),
			"$SRV.PING", "$SRV.PING.>", "$SRV.INFO", "$SRV.INFO.>", "$SRV.STATS", "$SRV.STATS.>")
		// Every inbox, unlike the outside roles: the stock nats CLI
		// replies to _INBOX.<random> unless given --inbox-prefix on every
		// command, and what any reply in the account carries (stream
		// data, tool answers) is what this role reads from the streams
		// anyway; no credential travels over the bus. Live, the subjects
		// the streams it reads store (transcripts, signals, session
		// events, deliveries), never the tool or run requests, whose
		// headers carry caller tokens; and the turns' live output, which
		// nothing stores: what it carries ends up in the transcripts.
		p.Sub.Allow.Add("_INBOX.>", names.Transcript(">"), names.Signal(">"), names.SessionEvents(), names.Deliver(">"), names.LiveAll())
	default:
		// worker, gateway, admin: the deployment's own subjects, JetStream
		// and its KV/object-store subjects, micro and inboxes. Nothing else
		// in the account (another deployment's prefix, the system subjects).
		prefix := names.Prefix
		if prefix == "" {
			prefix = bus.DefaultPrefix
		}
		ns := []string{prefix + ".>", "$JS.>", "$KV.>", "$O.>", "$SRV.>", "_INBOX.>"}
		p.Pub.Allow.Add(ns...)
		p.Sub.Allow.Add(ns...)
	}
	return p
}

// ChannelAdapterPermissions are an adapter's for one channel: the ingress,
// that channel's deliveries live, and, on SB_DELIVER, only the consumer
// named for the channel (create it with the filter <prefix>.deliver.<channel>,
// read, ack and delete it). No unnamed consumer: one could filter on any
// channel's deliveries.
func ChannelAdapterPermissions(names bus.Names, inbox, channel string) jwt.Permissions {
	var p jwt.Permissions
	ds, c := names.DeliverStream(), names.DeliverStream()+"."+channel
	p.Pub.Allow.Add(names.Inbound(), "$JS.API.INFO", "$JS.API.STREAM.INFO."+ds,
		"$JS.API.CONSUMER.CREATE."+c, "$JS.API.CONSUMER.CREATE."+c+"."+names.Deliver(channel),
		"$JS.API.CONSUMER.INFO."+c, "$JS.API.CONSUMER.MSG.NEXT."+c, "$JS.API.CONSUMER.DELETE."+c,
		"$JS.ACK."+c+".>", "$JS.FC."+c+".>", names.DeadLetter(channel))
	p.Sub.Allow.Add(inbox+".>", names.Deliver(channel))
	return p
}

// Token-key blocks appended to a role's credentials file after the NATS
// user's JWT and seed (which nats.go and the nats CLI read as the first two
// blocks and ignore the rest): the gateway and admin files carry the
// caller-token signing seed, the worker file only the issuer it trusts.
const (
	issuerBegin = "-----BEGIN SESSIONBUS TOKEN ISSUER-----"
	issuerEnd   = "------END SESSIONBUS TOKEN ISSUER------"
)

// IssuerBlock is the decorated block naming the caller-token issuer.
func IssuerBlock(pub string) []byte {
	return []byte("\n" + issuerBegin + "\n" + pub + "\n" + issuerEnd + "\n")
}

// FindIssuer returns the issuer named in an IssuerBlock of data, or "".
func FindIssuer(data []byte) string {
	s := string(data)
	i := strings.Index(s, issuerBegin)
	if i < 0 {
		return ""
	}
	rest := strings.TrimSpace(s[i+len(issuerBegin):])
	pub, _, _ := strings.Cut(rest, "\n")
	pub = strings.TrimSpace(pub)
	if !nkeys.IsValidPublicOperatorKey(pub) {
		return ""
	}
	return pub
}

// InboxOf is the inbox prefix of the NATS user in a credentials file.
func InboxOf(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read credentials %s: %v", path, err)
	}
	tok, err := jwt.ParseDecoratedJWT(data)
	if err == nil && strings.HasPrefix(tok, "eyJ") {
		var uc *jwt.UserClaims
		if uc, err = jwt.DecodeUserClaims(tok); err == nil {
			return InboxPrefix(uc.Subject), nil
		}
	}
	return "", fmt.Errorf("credentials %s hold no NATS user (mint one with `sessionbus creds ROLE`)", path)
}

// RoleOf is the role a credentials file's NATS user was minted for (its
// role tag), "" when the file holds no NATS user.
func RoleOf(path string) (Role, error) {
	_, role, err := UserOf(path)
	return role, err
}

// UserOf is the NATS user of a credentials file (its claims, signature
// checked against the issuer it names) and the role it was minted for; nil
// and "" when the file holds no NATS user.
func UserOf(path string) (*jwt.UserClaims, Role, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read credentials %s: %v", path, err)
	}
	tok, err := jwt.ParseDecoratedJWT(data)
	if err != nil || !strings.HasPrefix(tok, "eyJ") {
		return nil, "", nil
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return nil, "", fmt.Errorf("credentials %s: the NATS user JWT does not decode: %v", path, err)
	}
	for _, t := range uc.Tags {
		if r, ok := strings.CutPrefix(t, "role:"); ok {
			role, err := ParseRole(r)
			return uc, role, err
		}
	}
	return uc, "", nil
}

// ConnectOptions are the options a command connects with given its
// credentials file: none when the file holds no NATS user (a server without
// auth), else the user's JWT and seed and the inbox its permissions allow.
func ConnectOptions(path string) ([]nats.Option, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read credentials %s: %v", path, err)
	}
	tok, err := jwt.ParseDecoratedJWT(data)
	if err != nil || !strings.HasPrefix(tok, "eyJ") {
		return nil, nil
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return nil, fmt.Errorf("credentials %s: the NATS user JWT does not decode: %v", path, err)
	}
	// the server refuses an expired user with a bare authorization
	// violation; say which file and why
	if uc.Expires > 0 && time.Unix(uc.Expires, 0).Before(time.Now()) {
		return nil, fmt.Errorf("credentials %s: the NATS user expired at %s: mint a new file with `sessionbus creds ROLE`", path, time.Unix(uc.Expires, 0).UTC().Format(time.RFC3339))
	}
	return []nats.Option{nats.UserCredentials(path), nats.CustomInboxPrefix(InboxPrefix(uc.Subject))}, nil
}
