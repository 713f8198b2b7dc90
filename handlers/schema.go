package handlers

import (
	"context"
	"encoding/json"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/schema"
)

// Schema answers the schema subject (bus.Names.Schema): every tool the
// caller may call, in OpenAI function-calling format. The filter is the
// one every tool call passes (checkToolPolicy), so a model or MCP host is
// offered exactly the tools that would not be refused with a 403.
func (d *Deps) Schema() bus.Handler {
	return bus.HandlerFunc(func(_ context.Context, req *bus.Request) (any, error) {
		r, err := d.newRequester(req.Caller)
		if err != nil {
			return nil, bus.Thrown(err)
		}
		fns := schema.OpenAI(func(name string) bool { return d.checkToolPolicy(r, name) == nil })
		b, err := json.Marshal(fns)
		return json.RawMessage(b), err
	})
}
