package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sessionbus/sessionbus/bus"
)

// InboundPath is where the adapter takes human messages.
const InboundPath = "/inbound"

// inboundBody is a POST on /inbound: the fields of `sessionbus chat
// --route` under their flag names. The ingress's own names (accountId,
// groupId, threadId, agentId) are accepted too, so a body written for
// sb.inbound works here unchanged.
type inboundBody struct {
	From           string `json:"from"`
	Text           string `json:"text"`
	Channel        string `json:"channel"`
	To             string `json:"to"`
	Account        string `json:"account"`
	Group          string `json:"group"`
	Thread         string `json:"thread"`
	Agent          string `json:"agent"`
	AccountID      string `json:"accountId"`
	GroupID        string `json:"groupId"`
	ThreadID       string `json:"threadId"`
	AgentID        string `json:"agentId"`
	ChatType       string `json:"chatType"`
	SessionKey     string `json:"sessionKey"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// Handler serves POST /inbound.
func (a *Adapter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(InboundPath, a.serveInbound)
	return mux
}

// serveInbound takes one message: 202 with the ingress's answer once the
// run is queued, or a status and one line saying what was wrong. Every
// refusal, here or by the ingress, happens before anything is written.
func (a *Adapter) serveInbound(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "POST a JSON message to "+InboundPath)
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxInboundBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over %d bytes, the most a message may have: a message's text is at most 65536 bytes; split it", MaxInboundBody))
		return
	case err != nil:
		httpError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var replayKey string
	if a.o.Secret != nil {
		if replayKey, err = a.checkInbound(r.Header, raw, time.Now()); err != nil {
			httpError(w, http.StatusUnauthorized, err.Error())
			return
		}
	}
	msg, err := a.decodeInbound(raw)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if msg.IdempotencyKey == "" {
		// a replay of this signed request is then a repeat the ingress
		// answers with the first run and starts nothing for
		msg.IdempotencyKey = replayKey
	}
	tok, err := a.o.Token()
	if err != nil {
		a.o.Log.Error("webhook adapter: no adapter token", "err", err)
		httpError(w, http.StatusServiceUnavailable, "the adapter has no token for the bus: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), inboundTimeout)
	defer cancel()
	res, err := bus.SendInbound(ctx, a.nc, a.o.Names, tok, msg)
	if err != nil {
		status, text := busStatus(err)
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter(err)))
		}
		if status >= 500 {
			a.o.Log.Warn("webhook adapter: inbound message refused", "status", status, "err", err)
		}
		httpError(w, status, text)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(res)
}

// decodeInbound reads a body into the ingress's message for this channel.
func (a *Adapter) decodeInbound(raw []byte) (bus.InboundMessage, error) {
	var b inboundBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return bus.InboundMessage{}, fmt.Errorf("invalid JSON: %v: send one object such as {\"from\":\"4242\",\"text\":\"hello\"}", err)
	}
	if dec.More() {
		return bus.InboundMessage{}, errors.New("invalid JSON: more than one value in the body: send one object")
	}
	if b.Channel != "" {
		if ch, err := bus.NormalizeChannel(b.Channel); err != nil || ch != a.o.Channel {
			return bus.InboundMessage{}, fmt.Errorf("channel %q is not this adapter's channel %q: leave it out, or post to the adapter of that channel", b.Channel, a.o.Channel)
		}
	}
	pick := func(name, short, long string) (string, error) {
		if short != "" && long != "" && short != long {
			return "", fmt.Errorf("%s and %sId differ: give one of them", name, name)
		}
		if short == "" {
			return long, nil
		}
		return short, nil
	}
	m := bus.InboundMessage{Channel: a.o.Channel, From: b.From, Text: b.Text, To: b.To,
		ChatType: b.ChatType, SessionKey: b.SessionKey, IdempotencyKey: b.IdempotencyKey}
	var err error
	for _, f := range []struct {
		name, short, long string
		to                *string
	}{{"account", b.Account, b.AccountID, &m.AccountID}, {"group", b.Group, b.GroupID, &m.GroupID},
		{"thread", b.Thread, b.ThreadID, &m.ThreadID}, {"agent", b.Agent, b.AgentID, &m.AgentID}} {
		if *f.to, err = pick(f.name, f.short, f.long); err != nil {
			return m, err
		}
	}
	return m, nil
}

// busStatus maps a refusal of the ingress to the HTTP status the sender
// of the message should act on: its own mistakes keep their code, the
// adapter's (a bad or expired token, one for another channel) are a bad
// gateway, and a bus that cannot take the message now is unavailable.
func busStatus(err error) (int, string) {
	e, ok := bus.AsError(err)
	if !ok {
		return http.StatusServiceUnavailable, "the bus did not answer: " + err.Error() + "; retry later"
	}
	switch e.Code {
	case bus.CodeBadRequest, bus.CodeNotFound, bus.CodeTooLarge, bus.CodeTooManyRequests, bus.CodeUnavailable:
		return e.Code, e.Message
	case bus.CodeUnauthorized, bus.CodeForbidden:
		return http.StatusBadGateway, "the bus refused this adapter: " + e.Message
	}
	return http.StatusBadGateway, e.Message
}

// retryAfter is the seconds a sender should wait, from the bus's hint.
func retryAfter(err error) int {
	if e, ok := bus.AsError(err); ok && e.RetryAfter() > 0 {
		return int(e.RetryAfter().Seconds()) + 1
	}
	return 1
}

func httpError(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n")
}
