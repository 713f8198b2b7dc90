package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Call sends one tool request with a caller token and returns the reply
// body. A thrown tool error comes back as *Error with its code (a 429 with
// its RetryAfterMs).
func Call(ctx context.Context, nc *nats.Conn, names Names, token, tool string, params []byte) ([]byte, error) {
	return request(ctx, nc, names.Tool(tool), token, params)
}

// Inbound brings one human turn in on names.Inbound() with a channel
// adapter's token (docs/inbound.md) and returns the reply body; a refusal
// comes back as *Error with its code.
func Inbound(ctx context.Context, nc *nats.Conn, names Names, token string, body []byte) ([]byte, error) {
	return request(ctx, nc, names.Inbound(), token, body)
}

// SessionOp sends a session lifecycle operation (delete, reset) with an
// adapter token.
func SessionOp(ctx context.Context, nc *nats.Conn, names Names, op, token string, body []byte) ([]byte, error) {
	return request(ctx, nc, names.SessionOp(op), token, body)
}

// CronOp sends a cron operation (<prefix>.ops.cron.<op>) with an ops
// (adapter '*') token and returns the reply body.
func CronOp(ctx context.Context, nc *nats.Conn, names Names, op, token string, body []byte) ([]byte, error) {
	return request(ctx, nc, names.CronOp(op), token, body)
}

// Schema asks names.Schema() for the tools the caller may call, in OpenAI
// function-calling format (docs/clients.md).
func Schema(ctx context.Context, nc *nats.Conn, names Names, token string) ([]byte, error) {
	return request(ctx, nc, names.Schema(), token, nil)
}

// request is one request to a worker endpoint on subject.
func request(ctx context.Context, nc *nats.Conn, subject, token string, params []byte) ([]byte, error) {
	if len(params) == 0 {
		params = []byte("{}")
	}
	msg := nats.NewMsg(subject)
	msg.Data = params
	if token != "" {
		msg.Header.Set(HeaderToken, token)
	}
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrMaxPayload) {
		return nil, Errorf(CodeTooLarge, "request body is %d bytes; the server accepts at most %d bytes per message and a worker at most %d: send less", len(params), nc.MaxPayload(), MaxRequestBytes)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, Errorf(CodeUnavailable, "no sessionbus worker answers on %s: start `sessionbus serve` or `sessionbus worker`", subject)
	}
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	if e := replyError(reply); e != nil {
		return nil, e
	}
	return reply.Data, nil
}

// CallJSON is Call with the reply decoded into out.
func CallJSON(ctx context.Context, nc *nats.Conn, names Names, token, tool string, params any, out any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return err
	}
	data, err := Call(ctx, nc, names, token, tool, body)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}
