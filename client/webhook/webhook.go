// Package webhook is a channel adapter that speaks HTTP: it takes human
// messages as POSTs on /inbound and brings them into the bus through the
// ingress (routed as OpenClaw routes them), and it POSTs every reply the
// bus delivers on its channel to one URL, signed, retried and recorded as
// a dead letter when the receiver never takes it (docs/inbound.md).
package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// HTTP headers of both directions.
const (
	// HeaderSignature carries "sha256=" and the lower-case hex HMAC-SHA256,
	// keyed with the shared secret, of the HeaderTimestamp value, a "."
	// and the exact body bytes (Sign).
	HeaderSignature = "X-Sessionbus-Signature"
	// HeaderTimestamp is when the request was signed, in Unix seconds: a
	// request more than SignatureTolerance away from the receiver's clock
	// is refused, so a captured one cannot be sent again later.
	HeaderTimestamp = "X-Sessionbus-Timestamp"
	// HeaderDelivery is a delivery's id: the same on every retry and on a
	// redelivery after an adapter crash, so a receiver drops repeats by it.
	HeaderDelivery = "X-Sessionbus-Delivery"
	// HeaderAttempt numbers the attempts at one delivery from 1.
	HeaderAttempt = "X-Sessionbus-Attempt"
	// HeaderChannel names the adapter's channel.
	HeaderChannel = "X-Sessionbus-Channel"
)

// Defaults of Options.
const (
	// MaxInboundBody bounds a POST on /inbound: a message's text is at most
	// 64 KiB, and its JSON (escapes, ids) fits well within four times that.
	MaxInboundBody   = 256 << 10
	DefaultAttempts  = 8
	DefaultBackoff   = time.Second
	MaxBackoff       = time.Minute
	DefaultTimeout   = 10 * time.Second
	DefaultAckWait   = 30 * time.Second
	DefaultInFlight  = 1
	inboundTimeout   = 15 * time.Second
	consumerRetryGap = 2 * time.Second
)

// Options configure an Adapter.
type Options struct {
	Channel    string // normalized channel id (bus.NormalizeChannel)
	DeliverURL string
	Secret     []byte // nil: nothing is signed or checked
	// LegacySignatures also takes /inbound requests without
	// HeaderTimestamp whose signature covers the body alone (such a
	// request can be replayed), and signs deliveries that way, for
	// senders and receivers not yet signing the timestamp.
	LegacySignatures bool
	Names            bus.Names
	// Token returns the adapter token sent with each inbound message; it
	// is called per message, so a rotated token file is picked up.
	Token func() (string, error)
	// MaxInFlight bounds the deliveries handed out and not yet acked, over
	// every process of the channel (the durable consumer's MaxAckPending).
	// 1 keeps replies in stream order however many adapters run; more
	// lets one process post several sessions' replies at once, still one
	// at a time per session.
	MaxInFlight int
	AckWait     time.Duration // the consumer's; longer than Timeout
	Attempts    int           // posts of one delivery before it is a dead letter
	Backoff     time.Duration // wait after the first failed post; doubles up to MaxBackoff
	Timeout     time.Duration // one POST to the deliver URL
	Instance    string        // this process, in dead letters and logs
	Client      *http.Client
	Log         *slog.Logger
}

// Adapter is one webhook adapter process's state.
type Adapter struct {
	o  Options
	nc *nats.Conn
	js jetstream.JetStream
}

// New checks o and fills its defaults.
func New(nc *nats.Conn, o Options) (*Adapter, error) {
	ch, err := bus.NormalizeChannel(o.Channel)
	if err != nil {
		return nil, err
	}
	o.Channel = ch
	u, err := url.Parse(o.DeliverURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("deliver URL %q is not an http:// or https:// URL", o.DeliverURL)
	}
	if o.Token == nil {
		return nil, errors.New("no adapter token source")
	}
	o.MaxInFlight = orDefault(o.MaxInFlight, DefaultInFlight)
	o.AckWait = orDefault(o.AckWait, DefaultAckWait)
	o.Attempts = orDefault(o.Attempts, DefaultAttempts)
	o.Backoff = orDefault(o.Backoff, DefaultBackoff)
	o.Timeout = orDefault(o.Timeout, DefaultTimeout)
	if o.AckWait <= o.Timeout {
		// the server would hand a delivery to another adapter while this
		// one still waits for the receiver: a second POST of it
		return nil, fmt.Errorf("ack wait %v must be longer than the POST timeout %v", o.AckWait, o.Timeout)
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Adapter{o: o, nc: nc, js: js}, nil
}

func orDefault[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}
