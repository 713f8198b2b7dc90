package transcripts

import (
	"bytes"
	"encoding/json"
)

// RunMarker is the field the gateway puts on the entries a run appends
// (its prompt, its reply): {"run": <run id>, "part": "prompt"|"reply"|...}.
const RunMarker = "__sessionbus"

// PartHolder is the run an entry may hold its session for: the run of a
// marked part that is not a reply (a reply closes the turn), "" for a
// reply or an entry without a marker. The gateway's session lane and the
// workers' stop both read the session's holder from its newest entry.
func PartHolder(data []byte) string {
	if !bytes.Contains(data, []byte(RunMarker)) {
		return ""
	}
	var m struct {
		M *struct {
			Run  string `json:"run"`
			Part string `json:"part"`
		} `json:"__sessionbus"`
	}
	if json.Unmarshal(data, &m) != nil || m.M == nil || m.M.Part == "reply" {
		return ""
	}
	return m.M.Run
}
