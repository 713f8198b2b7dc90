package sessions

import (
	"bytes"
	"encoding/json"
)

// Goal states: a session's goal is pursued until someone clears it.
const (
	GoalActive  = "active"
	GoalCleared = "cleared"
)

// Goal is a session's goal, OpenClaw's session `goal`: its objective and
// who changed it last, when. A cleared goal keeps who cleared it and when
// (the objective is gone), so session_status can say who took it away.
type Goal struct {
	Objective string `json:"objective,omitempty"`
	Status    string `json:"status"`              // GoalActive | GoalCleared
	CreatedAt int64  `json:"createdAt,omitempty"` // unix ms: when this objective was first set
	UpdatedAt int64  `json:"updatedAt"`           // unix ms: the latest change, the clear included
	// ActorType and ActorID are who made the latest change, as the signal
	// log names actors: "human" and the sender's id on the channel, or the
	// operator's name for an ops request.
	ActorType string `json:"actorType,omitempty"`
	ActorID   string `json:"actorId,omitempty"`
	// Channel is where the change came from: the chat channel of a /goal
	// message, or "ops" for an ops request.
	Channel string `json:"channel,omitempty"`
}

// Active reports whether g is a goal being pursued.
func (g *Goal) Active() bool { return g != nil && g.Status == GoalActive }

// UnmarshalJSON also reads a goal stored as a bare string (an objective
// with no history), so an OpenClaw store entry written that way imports
// instead of failing the whole entry.
func (g *Goal) UnmarshalJSON(data []byte) error {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return err
		}
		*g = Goal{Objective: s, Status: GoalActive}
		return nil
	}
	type plain Goal // without this method
	return json.Unmarshal(data, (*plain)(g))
}
