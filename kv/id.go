package kv

import "github.com/google/uuid"

// NewSessionID returns a random UUID v4, the shape OpenClaw gives sessionId
// (and runId).
func NewSessionID() string { return uuid.NewString() }
