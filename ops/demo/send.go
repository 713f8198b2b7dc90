package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// sendScenario sends a message from the main session to a group session of
// the same agent and waits for the reply; the gateway then runs two
// ping-pong turns and the announce step, whose message goes to the group's
// channel subject, which the demo listens on like a channel adapter would.
func sendScenario(ctx context.Context, o Options, step func(title, as, tool, params string) error) error {
	deliver := o.Deps.Names.Deliver(">")
	sub, err := o.Conn.SubscribeSync(deliver)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := step("sessions_send waits for the target's reply (a gateway runs the turn with the scripted agent)",
		"agent:main:main", "sessions_send", `{"sessionKey":"agent:main:discord:group:release-team","message":"When does v2 ship?","timeoutSeconds":30}`); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\n== then, in the background: 2 ping-pong turns and the announce step; the announce goes to %s\n", deliver)
	msg, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return fmt.Errorf("no announce on %s: %w", deliver, err)
	}
	printDelivery(o, msg)
	return step("the target's transcript holds the turns, marked as inter-session data",
		"agent:main:main", "sessions_history", `{"sessionKey":"agent:main:discord:group:release-team","limit":6}`)
}

func printDelivery(o Options, msg *nats.Msg) {
	var pretty map[string]any
	_ = json.Unmarshal(msg.Data, &pretty)
	b, _ := json.MarshalIndent(pretty, "", "  ")
	fmt.Fprintf(o.Out, "%s\n%s\n", msg.Subject, b)
}
