package transcripts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// seqReq is a direct get of the transcript message at stream sequence seq.
func (t *Store) seqReq(seq uint64) *nats.Msg {
	b := make([]byte, 0, 32)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, '}')
	return &nats.Msg{Subject: t.dgStream, Data: b}
}

// lastForReq is a direct get of the newest transcript message on subject.
func (t *Store) lastForReq(subject string) *nats.Msg {
	return &nats.Msg{Subject: t.dgStream + "." + subject}
}

// kvLastReq is a direct get of key's last value in the index bucket.
func (t *Store) kvLastReq(key string) *nats.Msg {
	return &nats.Msg{Subject: t.dgKV + t.kvPre + key}
}

// kvLeaderReq asks the index bucket's leader for key's last value, in place
// of kvLastReq's direct get (answer through leaderReplies).
func (t *Store) kvLeaderReq(key string) *nats.Msg {
	return bus.LeaderGetRequest(t.api, t.kvName, 0, t.kvPre+key)
}

// pubAck is a JetStream publish acknowledgement.
type pubAck struct {
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch,omitempty"`
	Count  uint64              `json:"count,omitempty"`
	Dup    bool                `json:"duplicate,omitempty"`
	Error  *jetstream.APIError `json:"error,omitempty"`
}

// parseAck decodes a JetStream publish ack; API errors come back as
// *jetstream.APIError (errors.Is against jetstream's sentinels works).
func parseAck(m *nats.Msg) (pubAck, error) {
	var a pubAck
	switch st := msgStatus(m); st {
	case "":
	case "503":
		return a, ErrUnavailable
	default:
		return a, fmt.Errorf("streams: publish: status %s %s", st, m.Header.Get("Description"))
	}
	if seq, ok := fastAckSeq(m.Data); ok {
		a.Seq = seq
		return a, nil
	}
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return a, fmt.Errorf("streams: bad publish ack %q: %w", m.Data, err)
	}
	if a.Error != nil {
		return a, a.Error
	}
	if a.Seq == 0 {
		return a, fmt.Errorf("streams: publish ack without sequence: %q", m.Data)
	}
	return a, nil
}

// fastAckSeq parses the common ack {"stream":"X","seq":N} without reflection.
// Anything else (errors, batch acks, duplicates, domains) takes the JSON path.
func fastAckSeq(b []byte) (uint64, bool) {
	const pre = `{"stream":"`
	if len(b) < len(pre)+10 || string(b[:len(pre)]) != pre {
		return 0, false
	}
	i := len(pre)
	for i < len(b) && b[i] != '"' && b[i] != '\\' {
		i++
	}
	const mid = `","seq":`
	if i+len(mid) >= len(b) || string(b[i:i+len(mid)]) != mid {
		return 0, false
	}
	i += len(mid)
	var v uint64
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		v = v*10 + uint64(b[i]-'0')
		i++
	}
	if i == start || i+1 != len(b) || b[i] != '}' || v == 0 || i-start > 19 {
		return 0, false
	}
	return v, true
}

// leaderGet reads one message of the transcript stream from its leader
// (see bus.LeaderGetRequest): by sequence (seq > 0) or the newest on
// lastBySubj. Used on a replicated stream where a follower's view could
// mislead: a 404 for a sequence the index names, or a probe that is behind
// the head read before it.
func (t *Store) leaderGet(ctx context.Context, seq uint64, lastBySubj string) (rawEntry, bool, error) {
	if !t.replicated {
		return rawEntry{}, false, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.opts.timeout)
		defer cancel()
	}
	stream := t.names.TranscriptsStream()
	m, err := t.nc.RequestMsgWithContext(ctx, bus.LeaderGetRequest(t.api, stream, seq, lastBySubj))
	if errors.Is(err, nats.ErrNoResponders) {
		return rawEntry{}, false, ErrUnavailable
	}
	if err != nil {
		return rawEntry{}, false, err
	}
	if m, err = bus.LeaderGetReply(stream, m); err != nil {
		return rawEntry{}, false, leaderErr(stream, err)
	}
	return parseEntryMsg(m)
}

// leaderErr is the error of a leader read: ErrUnavailable when the stream
// has no leader (JetStream answers 503 while one is elected).
func leaderErr(stream string, err error) error {
	var ae *jetstream.APIError
	if errors.As(err, &ae) && ae.Code == 503 {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, stream, err)
	}
	return fmt.Errorf("streams: read from the leader of %s: %w", stream, err)
}

// leaderReplies turns the replies to requests built by leaderReqs into
// direct-get replies.
func leaderReplies(streams []string, res []*nats.Msg) error {
	for i, m := range res {
		r, err := bus.LeaderGetReply(streams[i], m)
		if err != nil {
			return leaderErr(streams[i], err)
		}
		res[i] = r
	}
	return nil
}
