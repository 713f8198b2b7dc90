package bus

import (
	"crypto/sha256"
	"fmt"
	"strings"
)

// DerivedUUID is a name-based UUID (version 8) of parts: the same parts
// give the same id on every host, so a retried request (an idempotency
// key, a redelivered step) names the run, child or message it named the
// first time. The first part should name the purpose, so two derivations
// from the same inputs never collide.
func DerivedUUID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
