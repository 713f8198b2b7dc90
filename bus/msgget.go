package bus

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reads on a replicated stream. A direct get ($JS.API.DIRECT.GET) may be
// answered by any replica, and a follower applies a write a moment after
// the leader acknowledged it (longer after a restart: it serves direct gets
// from 90% caught up), so a direct get can miss an acknowledged write.
// $JS.API.STREAM.MSG.GET is answered by the stream leader only, which has
// applied every write it acknowledged. These helpers build that request and
// turn its JSON reply into the shape of a direct-get reply, so code that
// parses direct gets reads either. A single-replica stream has nothing to
// lag and keeps its direct gets.

// LeaderGetRequest is a STREAM.MSG.GET request for stream, by sequence
// (seq > 0) or for the last message on lastBySubj. api is the JetStream
// API prefix ending in a dot ("$JS.API.").
func LeaderGetRequest(api, stream string, seq uint64, lastBySubj string) *nats.Msg {
	var body []byte
	if seq > 0 {
		body = strconv.AppendUint(append(body, `{"seq":`...), seq, 10)
		body = append(body, '}')
	} else {
		body, _ = json.Marshal(struct {
			LastBySubj string `json:"last_by_subj"`
		}{lastBySubj})
	}
	return &nats.Msg{Subject: api + "STREAM.MSG.GET." + stream, Data: body}
}

// LeaderGetReply converts a STREAM.MSG.GET reply into what a direct get
// would have answered: the stored message's headers plus Nats-Stream,
// Nats-Subject, Nats-Sequence and Nats-Time-Stamp, and its data; a
// header-only reply with Status 404 when the stream holds no such message.
// A status reply (503 no responders, ...) passes through unchanged. Any
// other API error is returned as a *jetstream.APIError.
func LeaderGetReply(stream string, m *nats.Msg) (*nats.Msg, error) {
	if m.Header != nil && m.Header.Get("Status") != "" {
		return m, nil
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("bad %s message-get reply: %w", stream, err)
	}
	if (resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound) || (resp.Error == nil && resp.Message == nil) {
		return &nats.Msg{Header: nats.Header{"Status": {"404"}, "Description": {"Message Not Found"}}}, nil
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	h := nats.Header{}
	if len(resp.Message.Header) > 0 {
		var err error
		if h, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("%s seq %d: stored headers: %w", stream, resp.Message.Seq, err)
		}
	}
	h.Set(jetstream.StreamHeader, stream)
	h.Set(jetstream.SubjectHeader, resp.Message.Subject)
	h.Set(jetstream.SequenceHeader, strconv.FormatUint(resp.Message.Seq, 10))
	h.Set(jetstream.TimeStampHeaer, resp.Message.Time.Format(time.RFC3339Nano))
	return &nats.Msg{Subject: m.Subject, Header: h, Data: resp.Message.Data}, nil
}
