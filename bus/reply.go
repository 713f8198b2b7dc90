package bus

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
)

// encodeReply passes already-encoded results through: a tool that had to
// measure its encoded size (sessions_list's 64 KiB budget) should not pay
// for a second encoding.
func encodeReply(res any) ([]byte, error) {
	if raw, ok := res.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(res)
}

func (s *Service) send(reply string, m *nats.Msg) {
	if reply == "" {
		return
	}
	m.Subject = reply
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn("respond", "subject", reply, "err", err)
	}
}
