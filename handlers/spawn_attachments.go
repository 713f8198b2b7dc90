package handlers

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/rules"
)

// Attachment limits. OpenClaw caps the count at 50; the byte limits are
// ours: the whole tool call travels as one NATS message (1 MiB by default)
// with base64 content a third larger than its bytes, and each file becomes
// one transcript entry of the child.
const (
	maxSpawnAttachments     = 50
	maxAttachmentFileBytes  = 256 << 10 // decoded bytes of one file
	maxAttachmentTotalBytes = 512 << 10 // decoded bytes of all files
	maxAttachmentNameBytes  = 255
)

// spawnAttachmentsDirFmt is the directory the attachments are named under
// when attachAs.mountPath is not given (%s: the child's uuid).
const spawnAttachmentsDirFmt = ".openclaw/attachments/%s"

// spawnAttachment is one file of the attachments parameter.
type spawnAttachment struct {
	name, mimeType, encoding string
	content                  string // as sent
	bytes                    int
	sha256                   string
}

type spawnAttachSummary = schema.SpawnAttachSummary

type spawnAttachFile = schema.SpawnAttachFile

const attachmentsShape = "attachments must be an array of {name, content, encoding?: \"utf8\"|\"base64\", mimeType?} objects"

// readAttachments checks the attachments' shape (thrown); their content
// (names, base64, sizes) is checked by checkAttachments (returned), before
// anything is written.
func readAttachments(p rules.Params) ([]spawnAttachment, bool, error) {
	raw, ok := p.Raw("attachments")
	if !ok {
		return nil, false, nil
	}
	items, isArray := raw.([]any)
	if !isArray {
		return nil, false, badRequest(attachmentsShape)
	}
	out := make([]spawnAttachment, 0, len(items))
	for i, it := range items {
		m, isObj := it.(map[string]any)
		if !isObj {
			return nil, false, badRequest(fmt.Sprintf("%s; item %d is not an object", attachmentsShape, i))
		}
		ap := rules.Params(m)
		var a spawnAttachment
		var err error
		field := func(name string) string { return fmt.Sprintf("attachments[%d].%s", i, name) }
		for _, f := range []struct {
			name string
			dst  *string
		}{{"name", &a.name}, {"mimeType", &a.mimeType}} {
			if *f.dst, _, err = ap.String(f.name); err != nil {
				return nil, false, badRequest(field(f.name) + " must be a string")
			}
		}
		c, hasC := m["content"]
		if s, isStr := c.(string); hasC && isStr {
			a.content = s // untrimmed: content is data
		} else {
			return nil, false, badRequest(field("content") + " must be a string (the file's text, or its bytes in base64)")
		}
		if a.encoding, _, err = ap.Enum("encoding", "utf8", "utf8", "base64"); err != nil {
			return nil, false, badRequest(field("encoding") + ` must be "utf8" or "base64"`)
		}
		out = append(out, a)
	}
	return out, len(out) > 0, nil
}

// readMountPath reads attachAs.mountPath, the directory the attachments are
// named under (a relative path without "..").
func readMountPath(p rules.Params) (string, error) {
	raw, ok := p.Raw("attachAs")
	if !ok {
		return "", nil
	}
	m, isObj := raw.(map[string]any)
	if !isObj {
		return "", badRequest("attachAs must be an object such as {\"mountPath\": \"inputs\"}")
	}
	mp, _, err := rules.Params(m).String("mountPath")
	if err != nil {
		return "", badRequest("attachAs.mountPath must be a string")
	}
	if mp == "" {
		return "", nil
	}
	clean := path.Clean(mp)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(clean, 0) {
		return "", badRequest(fmt.Sprintf("attachAs.mountPath %s must be a relative path inside the child's workspace (no leading / and no ..)", strconv.Quote(mp)))
	}
	return clean, nil
}

// checkAttachments validates names and content and fills sizes and
// digests; a problem is a returned error, and nothing has been written.
func checkAttachments(as []spawnAttachment) (int, string) {
	if len(as) > maxSpawnAttachments {
		return 0, fmt.Sprintf("attachments: at most %d files per spawn (got %d)", maxSpawnAttachments, len(as))
	}
	seen := map[string]bool{}
	total := 0
	for i := range as {
		a := &as[i]
		if msg := attachmentNameProblem(a.name); msg != "" {
			return 0, fmt.Sprintf("attachments[%d].name %s", i, msg)
		}
		if seen[a.name] {
			return 0, fmt.Sprintf("attachments[%d].name %s is used twice; file names must be unique", i, strconv.Quote(a.name))
		}
		seen[a.name] = true
		data := []byte(a.content)
		if a.encoding == "base64" {
			var err error
			if data, err = decodeBase64(a.content); err != nil {
				return 0, fmt.Sprintf("attachments[%d] (%s): content is not valid base64 (%v); send standard base64, or encoding \"utf8\" for text", i, a.name, err)
			}
		}
		if len(data) > maxAttachmentFileBytes {
			return 0, fmt.Sprintf("attachments[%d] (%s) is %d bytes; one file may be at most %d bytes", i, a.name, len(data), maxAttachmentFileBytes)
		}
		total += len(data)
		if total > maxAttachmentTotalBytes {
			return 0, fmt.Sprintf("attachments total more than %d bytes (%d after attachments[%d]); send fewer or smaller files", maxAttachmentTotalBytes, total, i)
		}
		sum := sha256.Sum256(data)
		a.bytes, a.sha256 = len(data), hex.EncodeToString(sum[:])
	}
	return total, ""
}

func attachmentNameProblem(name string) string {
	switch {
	case name == "":
		return "is required (a file name such as \"notes.md\")"
	case len(name) > maxAttachmentNameBytes:
		return fmt.Sprintf("is longer than %d bytes", maxAttachmentNameBytes)
	case name == "." || name == "..", strings.ContainsAny(name, "/\\\x00"):
		return fmt.Sprintf("%s must be a plain file name (no /, \\ or NUL, not . or ..)", strconv.Quote(name))
	}
	return ""
}

// decodeBase64 is strict standard base64 (padding optional), ignoring
// line breaks and spaces, which encoders commonly insert.
func decodeBase64(s string) ([]byte, error) {
	t := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	enc := base64.StdEncoding
	if len(t)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	return enc.Strict().DecodeString(t)
}

// attachSummary is the reply's account of checked attachments: their
// count and bytes, the directory they are named under (attachAs.mountPath,
// else one per child) and each file's size and digest.
func attachSummary(as []spawnAttachment, totalBytes int, mountPath, childUUID string) *spawnAttachSummary {
	relDir := rules.FirstNonEmpty(mountPath, fmt.Sprintf(spawnAttachmentsDirFmt, childUUID))
	sum := &spawnAttachSummary{Count: len(as), TotalBytes: totalBytes, RelDir: relDir, Files: make([]spawnAttachFile, len(as))}
	for i, a := range as {
		sum.Files[i] = spawnAttachFile{Name: a.name, Bytes: a.bytes, SHA256: a.sha256}
	}
	return sum
}
