package gateway

import (
	"context"
	"errors"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// deliveryAllowed consults the send policy (session.sendPolicy, the
// entry's sendPolicy override first) before anything of session key is
// delivered to channel: a turn's reply to the route it came from, an
// agent-to-agent announce. A session with no entry is judged by its key.
// A read error is returned, so the delivery is retried rather than
// decided on a guess.
func (g *Gateway) deliveryAllowed(ctx context.Context, key, channel string) (bool, error) {
	var override, chatType string
	e, _, err := g.store.Get(ctx, key)
	switch {
	case err == nil:
		override, chatType = e.SendPolicy(), e.ChatType
	case !errors.Is(err, sessions.ErrNotFound):
		return false, err
	}
	if rules.ResolveSendPolicy(rules.ConfigSendPolicy(g.cfg.Session.SendPolicy), override, key, channel, chatType) == rules.SendDeny {
		g.log.Info("send policy denies the delivery; not delivered", "session", key, "channel", channel)
		return false, nil
	}
	return true, nil
}
