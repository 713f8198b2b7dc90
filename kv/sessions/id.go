package sessions

import "github.com/google/uuid"

// NewID returns a random UUID v4, the shape OpenClaw gives sessionId
// (and runId).
func NewID() string { return uuid.NewString() }
