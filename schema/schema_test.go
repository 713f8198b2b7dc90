package schema

import (
	"encoding/json"
	"testing"
)

func TestMetadataSize(t *testing.T) {
	total := 0
	for _, n := range Names() {
		for _, v := range Metadata(n) {
			total += len(v)
		}
	}
	t.Logf("metadata bytes: %d", total)
	b, _ := json.Marshal(OpenAI(nil))
	t.Logf("openai bytes: %d", len(b))
}
