package handlers

import (
	"context"
	"fmt"
	"path"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// spawnAttachmentEntryHead is the first line of an attachment's transcript
// entry: its path, bytes, sha256, mime type (", type" or nothing) and
// encoding; the content follows after a blank line.
const spawnAttachmentEntryHead = "[Subagent Attachment] %s (%d bytes, sha256 %s%s, encoding %s)"

// seedChildTranscript writes what precedes the child's first message: with
// fork, a copy of the requester's transcript (its newest entries that fit
// one atomic batch along with the attachments); then one entry per
// attachment. One Append, so all of it is stored or none. A retry (known)
// finds a transcript already seeded by a first call that stopped before
// its commit point and keeps it.
func (d *Deps) seedChildTranscript(ctx context.Context, requesterKey, childKey string, fork bool, as []spawnAttachment, sum *spawnAttachSummary, retry bool) error {
	enc := bus.EncodeKey(childKey)
	if retry {
		n, err := d.Transcripts.Count(ctx, enc)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	var entries [][]byte
	if fork {
		room := transcripts.MaxBatch - len(as)
		src, _, err := d.Transcripts.Tail(ctx, bus.EncodeKey(requesterKey), room, 0)
		if err != nil {
			return fmt.Errorf("read the requester's transcript: %w", err)
		}
		for _, e := range src {
			m, ok := decodeMessage(e.Data)
			if !ok {
				continue
			}
			delete(m, runMarker) // the requester's run bookkeeping is not the child's
			data, err := bus.Marshal(m)
			if err != nil {
				return err
			}
			entries = append(entries, data)
		}
	}
	for _, a := range as {
		mime := ""
		if a.mimeType != "" {
			mime = ", " + a.mimeType
		}
		p := path.Join(sum.RelDir, a.name)
		head := fmt.Sprintf(spawnAttachmentEntryHead, p, a.bytes, a.sha256, mime, a.encoding)
		data, err := bus.Marshal(map[string]any{
			"role":    "user",
			"content": head + "\n\n" + a.content,
			"attachment": map[string]any{
				"name": a.name, "path": p, "bytes": a.bytes, "sha256": a.sha256,
				"mimeType": a.mimeType, "encoding": a.encoding,
			},
		})
		if err != nil {
			return err
		}
		entries = append(entries, data)
	}
	if len(entries) == 0 {
		return nil
	}
	_, err := d.Transcripts.Append(ctx, enc, entries...)
	return err
}
