// Package opsapi is the read-only ops role's JetStream API: a worker
// checks each request the role makes and passes it on to $JS.API.
package opsapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// queue is the queue group of the workers' ops API subscriptions: one
// worker passes each request on.
const queue = "sessionbus-ops-js"

// opsAPIs are the JetStream API requests the ops role may make, relative
// to $JS.API: reads, and consumers of its own to page through a stream or
// watch a bucket. No ack, no update, purge or delete, no stream or bucket
// created.
var opsAPIs = []string{
	"INFO", "STREAM.NAMES", "STREAM.LIST", "STREAM.INFO.*", "STREAM.MSG.GET.*",
	"DIRECT.GET.*", "DIRECT.GET.*.>",
	"CONSUMER.NAMES.*", "CONSUMER.LIST.*", "CONSUMER.INFO.*.*",
	"CONSUMER.CREATE.*", "CONSUMER.CREATE.*.*", "CONSUMER.CREATE.*.*.>",
	"CONSUMER.MSG.NEXT.*.*",
}

// API passes the ops role's JetStream API requests (Names.OpsJSAPI, the
// prefix `nats --js-api-prefix` takes) on to $JS.API with the worker's
// rights, once it has checked them. The server answers a request on its
// reply subject and a push consumer delivers to its deliver subject, both
// chosen by the requester, and a stream stores whatever is published on a
// subject it captures, whoever publishes it: with the API open to ops, a
// read aimed at a transcript or bucket subject wrote its answer there. Here
// a request goes on only with an inbox as its reply subject, a consumer
// only with no deliver subject (pull) or an inbox, and only as a new one
// (an update could edit a consumer the deployment reads from).
type API struct {
	nc       *nats.Conn
	names    bus.Names
	log      *slog.Logger
	observer bus.ToolObserver // nil: none
	sub      *nats.Subscription
	refused  atomic.Int64
}

// Start subscribes to the ops API of names's deployment on nc, a
// connection that may use $JS.API (a worker's). observer, if not nil, is
// told of each request refused for its reply subject.
func Start(nc *nats.Conn, names bus.Names, log *slog.Logger, observer bus.ToolObserver) (*API, error) {
	if log == nil {
		log = slog.Default()
	}
	o := &API{nc: nc, names: names, log: log, observer: observer}
	var err error
	if o.sub, err = nc.QueueSubscribe(names.OpsJSAPI()+".>", queue, o.onRequest); err != nil {
		return nil, fmt.Errorf("subscribe to the ops JetStream API: %w", err)
	}
	return o, nil
}

// Stop ends the subscription (a request is passed on or refused at once,
// so none is left half done).
func (o *API) Stop() {
	if o != nil && o.sub != nil {
		_ = o.sub.Unsubscribe()
	}
}

// Refused is how many requests were dropped for a reply subject that is
// not an inbox.
func (o *API) Refused() int64 {
	if o == nil {
		return 0
	}
	return o.refused.Load()
}

func (o *API) onRequest(m *nats.Msg) {
	// Nowhere to say why a request is refused but its reply subject: one
	// that is not an inbox is dropped, as the tool endpoints drop theirs.
	if !bus.IsInbox(m.Reply) {
		o.refused.Add(1)
		o.log.Warn("refused an ops JetStream API request whose reply subject is not an inbox", "subject", m.Subject, "reply", m.Reply)
		if o.observer != nil {
			o.observer.ReplyRefused("ops.js")
		}
		return
	}
	api := strings.TrimPrefix(m.Subject, o.names.OpsJSAPI()+".")
	data, err := o.check(api, m.Data)
	if err != nil {
		o.log.Warn("refused an ops JetStream API request", "subject", m.Subject, "err", err)
		// the JetStream API's error shape, which nats.go and the nats CLI print
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 403, "description": err.Error()}})
		if err := o.nc.Publish(m.Reply, body); err != nil {
			o.log.Debug("answer a refused ops request", "err", err)
		}
		return
	}
	if err := o.nc.PublishMsg(&nats.Msg{Subject: "$JS.API." + api, Reply: m.Reply, Header: m.Header, Data: data}); err != nil {
		o.log.Warn("pass an ops JetStream API request on", "subject", m.Subject, "err", err)
	}
}

// check says whether ops may make request api (relative to $JS.API) with
// body data, and returns the body to pass on.
func (o *API) check(api string, data []byte) ([]byte, error) {
	allowed := false
	for _, p := range opsAPIs {
		if subjectMatches(api, p) {
			allowed = true
			break
		}
	}
	if !allowed {
		return nil, fmt.Errorf("the ops role may only read: $JS.API.%s is not a read (stream and consumer info and lists, message and direct gets, consumers of its own)", api)
	}
	// the gateways' durable takes runs off the queue: an edit (a new
	// filter stopped every turn) or a pull without ack (a run held back)
	// would change what the gateways do
	gw := o.names.RunsStream() + "." + o.names.GatewaysConsumer()
	if api == "CONSUMER.CREATE."+gw || strings.HasPrefix(api, "CONSUMER.CREATE."+gw+".") || api == "CONSUMER.MSG.NEXT."+gw {
		return nil, fmt.Errorf("the consumer %s is the gateways': read its state with consumer info, or create a consumer of your own", gw)
	}
	if strings.HasPrefix(api, "CONSUMER.CREATE.") {
		return checkConsumer(data)
	}
	return data, nil
}

// checkConsumer checks a consumer create request: no deliver subject
// (a pull consumer) or an inbox, and a create, never an update. The body
// passed on is re-encoded from what was checked, so the server reads the
// same one deliver subject and action (a key repeated or spelled in
// another case would otherwise be for the server's decoder to pick).
func checkConsumer(data []byte) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("the consumer create request is not a JSON object: %v", err)
	}
	var cfg map[string]json.RawMessage
	if c, ok := req["config"]; ok {
		if err := json.Unmarshal(c, &cfg); err != nil {
			return nil, fmt.Errorf("the consumer create request's config is not a JSON object: %v", err)
		}
	}
	for _, keys := range []struct {
		m    map[string]json.RawMessage
		want []string
	}{{req, []string{"config", "action"}}, {cfg, []string{"deliver_subject"}}} {
		for k := range keys.m {
			for _, w := range keys.want {
				if k != w && strings.EqualFold(k, w) {
					return nil, fmt.Errorf("the consumer create request has the key %q: spell it %q", k, w)
				}
			}
		}
	}
	var deliver, action string
	if v, ok := cfg["deliver_subject"]; ok {
		if err := json.Unmarshal(v, &deliver); err != nil {
			return nil, fmt.Errorf("the consumer's deliver_subject is not a string: %v", err)
		}
	}
	if deliver != "" && !bus.IsInbox(deliver) {
		return nil, fmt.Errorf("the ops role's consumers deliver only to an inbox: deliver subject %q is not one (use a pull consumer, or a deliver subject under _INBOX. with no wildcard)", deliver)
	}
	if v, ok := req["action"]; ok {
		if err := json.Unmarshal(v, &action); err != nil {
			return nil, fmt.Errorf("the consumer create request's action is not a string: %v", err)
		}
	}
	if action != "" && action != "create" {
		return nil, fmt.Errorf("the ops role may create consumers, not %s them (action %q): create one of your own under a new name", action, action)
	}
	// "" is create or update: pin it to create, so an existing consumer
	// of the same name is not edited
	req["action"] = json.RawMessage(`"create"`)
	if cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		req["config"] = b
	}
	return json.Marshal(req)
}

// subjectMatches reports whether subject matches pattern, whose tokens may
// be the wildcards * (one token) and a last > (one or more).
func subjectMatches(subject, pattern string) bool {
	st, pt := strings.Split(subject, "."), strings.Split(pattern, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) || (p != "*" && p != st[i]) || st[i] == "" {
			return false
		}
	}
	return len(st) == len(pt)
}
