package bus

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// InboundMessage is the body of a request on <prefix>.inbound
// (docs/inbound.md): one human message, naming its session or, without
// SessionKey, only where it came from so the worker routes it. Every
// adapter (`sessionbus chat`, the webhook adapter) sends this one shape.
type InboundMessage struct {
	SessionKey     string `json:"sessionKey,omitempty"`
	Channel        string `json:"channel"`
	From           string `json:"from"`
	Text           string `json:"text"`
	To             string `json:"to,omitempty"`
	AccountID      string `json:"accountId,omitempty"`
	ThreadID       string `json:"threadId,omitempty"`
	ChatType       string `json:"chatType,omitempty"`
	GroupID        string `json:"groupId,omitempty"`
	AgentID        string `json:"agentId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty"`
}

// InboundReply is the ingress's answer to an InboundMessage.
type InboundReply struct {
	Status     string `json:"status"` // accepted | ok | error | timeout
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey"`
	Reply      string `json:"reply,omitempty"`
	Error      string `json:"error,omitempty"`
	Repeat     bool   `json:"repeat,omitempty"`  // the idempotency key was seen: no second run
	Created    bool   `json:"created,omitempty"` // a routed message made its session
}

// SendInbound sends m to the ingress with an adapter token and decodes the
// answer; a refusal comes back as *Error with its code.
func SendInbound(ctx context.Context, nc *nats.Conn, names Names, token string, m InboundMessage) (InboundReply, error) {
	var res InboundReply
	body, err := json.Marshal(m)
	if err != nil {
		return res, err
	}
	data, err := Inbound(ctx, nc, names, token, body)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return res, &Error{Code: CodeInternal, Message: fmt.Sprintf("the ingress answered something else than its JSON reply: %v: %.200s", err, data)}
	}
	return res, nil
}
