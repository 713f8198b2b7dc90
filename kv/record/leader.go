package record

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A KV bucket answers gets with direct gets, which any replica of a
// replicated bucket may serve. A follower that has not caught up (a node
// restarting after a leader moved, say) answers "not found" for a key whose
// write was already acknowledged: a sub-agent's registry record, read by
// the gateway that runs the child, looked missing for 15 s in the cluster
// fault test. So on a replicated bucket a "not found" is confirmed with the
// stream leader, which alone serves $JS.API.STREAM.MSG.GET. A single-node
// bucket has no follower to lag and pays nothing.

// replicas caches the bucket's replica count (0: not read yet).
type replicas struct{ n atomic.Int32 }

func (b Bucket[T]) replicated(ctx context.Context) bool {
	if b.rep == nil {
		return false
	}
	n := b.rep.n.Load()
	if n == 0 {
		st, err := b.kv.Status(ctx)
		if err != nil {
			return false // cannot tell: keep the direct get's answer
		}
		ks, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			return false
		}
		n = int32(max(ks.StreamInfo().Config.Replicas, 1))
		b.rep.n.Store(n)
	}
	return n > 1
}

// msgGetResponse is the JetStream API's STREAM.MSG.GET reply.
type msgGetResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
	Message *struct {
		Sequence uint64 `json:"seq"`
		Header   []byte `json:"hdrs,omitempty"`
		Data     []byte `json:"data,omitempty"`
	} `json:"message,omitempty"`
}

// errMsgNotFound is JetStream's "no message found" (JSNoMessageFoundErr).
const errMsgNotFound = 10037

// leaderGet reads key's last value from the stream leader. found is false
// when the key holds nothing or its last operation deleted or purged it.
func (b Bucket[T]) leaderGet(ctx context.Context, key string) (data []byte, rev uint64, found bool, err error) {
	nc := b.js.Conn()
	stream := "KV_" + b.kv.Bucket()
	req, _ := json.Marshal(map[string]string{"last_by_subj": Subject(b.kv, key)})
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, 0, false, fmt.Errorf("%s %s: read from the stream leader: %w", b.noun, key, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, 0, false, fmt.Errorf("%s %s: read from the stream leader: %w", b.noun, key, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == errMsgNotFound {
			return nil, 0, false, nil
		}
		return nil, 0, false, fmt.Errorf("%s %s: read from the stream leader: %s", b.noun, key, resp.Error.Description)
	}
	if resp.Message == nil {
		return nil, 0, false, nil
	}
	if len(resp.Message.Header) > 0 {
		h, err := decodeHeader(resp.Message.Header)
		if err != nil {
			return nil, 0, false, fmt.Errorf("%s %s: read from the stream leader: %w", b.noun, key, err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return nil, 0, false, nil
		}
	}
	return resp.Message.Data, resp.Message.Sequence, true, nil
}

// decodeHeader parses a stored message's header block ("NATS/1.0" and
// MIME lines), as nats.go does for a received message.
// Its keys come back canonical ("Kv-Operation"); MIMEHeader.Get
// canonicalizes the key it is asked for too.
func decodeHeader(raw []byte) (textproto.MIMEHeader, error) {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	line, err := r.ReadLine()
	if err != nil || !strings.HasPrefix(line, "NATS/1.0") {
		return nil, errors.New("stored header without a NATS/1.0 line")
	}
	h, err := r.ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return h, nil
}
