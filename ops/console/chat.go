package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// Chat: the console is the webchat channel. A message goes in through the
// ingress (sb.inbound) with an adapter token for that channel, as any
// channel adapter's does, and is answered at once with the run id; the
// reply reaches the page as the turn's live output (the session's event
// stream) and lands in the transcript like any channel's.

type chatRequest struct {
	Key  string `json:"key"`
	Text string `json:"text"`
}

// ChatReply is the ingress's answer.
type ChatReply struct {
	Status     string `json:"status"`
	RunID      string `json:"runId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	Error      string `json:"error,omitempty"`
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, bus.MaxRequestBytes)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "send a JSON body: {\"key\": SESSION KEY, \"text\": MESSAGE}")
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		writeError(w, http.StatusBadRequest, "the message is empty: write something to send")
		return
	}
	if s.index.Get(req.Key) == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no session %q", req.Key))
		return
	}
	tok, err := s.o.Operator.Mint(bus.Caller{Adapter: Channel}, time.Minute)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	body, _ := json.Marshal(map[string]any{
		"sessionKey": req.Key, "channel": Channel, "from": u.Name, "text": req.Text,
		"idempotencyKey": "console-" + sessions.NewID(), "timeoutSeconds": 0,
	})
	ctx := r.Context()
	data, err := bus.Inbound(ctx, s.o.Conn, s.o.Names, tok, body)
	var res ChatReply
	if err == nil {
		err = json.Unmarshal(data, &res)
	}
	outcome := res.Status
	if err != nil {
		outcome = "error"
	}
	s.record(r, u, req.Key, fmt.Sprintf("console %s: chat message via %s: %s", u.Name, Channel, outcome), map[string]any{"action": "chat", "channel": Channel})
	if err != nil {
		writeToolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
