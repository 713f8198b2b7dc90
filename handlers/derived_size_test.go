package handlers

import (
	"testing"
	"unsafe"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// Every indexed session holds one derivedFields: it stays in the 16-byte
// allocation class, and sessions with the same agent and channel share
// their names.
func TestDerivedFieldsSmallAndShared(t *testing.T) {
	if n := unsafe.Sizeof(derivedFields{}); n > 16 {
		t.Fatalf("derivedFields is %d bytes, want at most 16", n)
	}
	derive := IndexDerive(config.Default())
	a := (*derivedFields)(derive(&sessions.Entry{Key: "agent:main:telegram:direct:u1", Channel: "telegram"}))
	b := (*derivedFields)(derive(&sessions.Entry{Key: "agent:main:telegram:direct:u2", Channel: "telegram"}))
	c := (*derivedFields)(derive(&sessions.Entry{Key: "agent:ops:slack:direct:u3", Channel: "slack"}))
	if a.Names != b.Names || a.agentID() != "main" || a.channel() != "telegram" {
		t.Fatalf("same agent and channel not shared: %+v %+v", *a.Names, *b.Names)
	}
	if c.Names == a.Names || c.agentID() != "ops" || c.channel() != "slack" {
		t.Fatalf("different names shared or wrong: %+v", *c.Names)
	}
}
