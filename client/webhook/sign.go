package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SignatureTolerance is how far a request's HeaderTimestamp may be from
// the receiver's clock, either way: enough for a retry and clock skew,
// short enough that a captured request is useless soon after.
const SignatureTolerance = 5 * time.Minute

const signaturePrefix = "sha256="

// Sign is the HeaderSignature value of a request whose HeaderTimestamp is
// timestamp (Unix seconds, as sent) and whose body is body: the HMAC-SHA256
// of timestamp + "." + body under secret. Signing the timestamp with the
// body is what lets a receiver refuse an old request sent again.
func Sign(secret []byte, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(sum(secret, []byte(timestamp), []byte("."), body))
}

// SignBody is the legacy HeaderSignature value, over the body alone, of
// an adapter run with Options.LegacySignatures.
func SignBody(secret, body []byte) string {
	return signaturePrefix + hex.EncodeToString(sum(secret, body))
}

// Verify checks, in constant time, a HeaderSignature value against the
// HeaderTimestamp value and the body it came with. It does not check the
// timestamp's age: CheckTimestamp does.
func Verify(secret []byte, timestamp string, body []byte, header string) bool {
	got, ok := parseSignature(header)
	return ok && hmac.Equal(got, sum(secret, []byte(timestamp), []byte("."), body))
}

// CheckTimestamp says what is wrong with a HeaderTimestamp value at now:
// not a whole number of Unix seconds, or more than SignatureTolerance
// before or after now.
func CheckTimestamp(timestamp string, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s %q: it must be the Unix time in whole seconds when the request was signed", HeaderTimestamp, timestamp)
	}
	tol := int64(SignatureTolerance / time.Second)
	// compared without subtracting ts, which may be any int64
	switch n := now.Unix(); {
	case ts < n-tol:
		return fmt.Errorf("stale %s %d: it is %ds before the receiver's clock (%d), and a request is taken at most %ds either side of it: sign each request (a retry too) when sending it, and keep the sender's clock in sync", HeaderTimestamp, ts, n-ts, n, tol)
	case ts > n+tol:
		return fmt.Errorf("%s %d is %ds after the receiver's clock (%d), and a request is taken at most %ds either side of it: keep the sender's clock in sync", HeaderTimestamp, ts, ts-n, n, tol)
	}
	return nil
}

// sum is the HMAC-SHA256 under secret of parts, one after the other.
func sum(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// parseSignature is the MAC of a HeaderSignature value.
func parseSignature(header string) ([]byte, bool) {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), signaturePrefix)
	if !ok {
		return nil, false
	}
	got, err := hex.DecodeString(hexSig)
	return got, err == nil
}

// signatureHelp is how to sign a request, for the 401s of /inbound.
const signatureHelp = "sign each request with the shared secret: " + HeaderTimestamp + ": <Unix seconds now>, " +
	HeaderSignature + ": sha256=<hex HMAC-SHA256 of the timestamp, \".\" and the exact body bytes>"

// checkInbound checks a signed request to /inbound at now. It returns the
// request's replay key: one derived from its MAC, the same for the
// request sent again and unguessable without the secret, which the
// caller uses as the idempotency key when the body gives none, so a
// replay inside the timestamp's window starts no second run. A legacy
// request (no timestamp, body-only signature, LegacySignatures) has no
// replay key: the same words sent twice on purpose must run twice, and
// nothing tells a replay from them. err is the 401's text.
func (a *Adapter) checkInbound(h http.Header, body []byte, now time.Time) (replayKey string, err error) {
	sig := h.Get(HeaderSignature)
	if sig == "" {
		return "", fmt.Errorf("missing %s header: %s", HeaderSignature, signatureHelp)
	}
	mac, ok := parseSignature(sig)
	if !ok {
		return "", fmt.Errorf("bad %s: it is not sha256=<hex>: %s", HeaderSignature, signatureHelp)
	}
	ts := h.Get(HeaderTimestamp)
	if ts == "" {
		if a.o.LegacySignatures && hmac.Equal(mac, sum(a.o.Secret, body)) {
			return "", nil
		}
		return "", fmt.Errorf("missing %s header: a signature over the body alone is not taken (it could be replayed); %s", HeaderTimestamp, signatureHelp)
	}
	if !hmac.Equal(mac, sum(a.o.Secret, []byte(ts), []byte("."), body)) {
		return "", fmt.Errorf("bad %s: it does not match the %s and body under the adapter's secret: %s", HeaderSignature, HeaderTimestamp, signatureHelp)
	}
	// the age is checked once the timestamp is known to be the sender's
	if err := CheckTimestamp(ts, now); err != nil {
		return "", err
	}
	key := sha256.Sum256(mac)
	return "sig-" + hex.EncodeToString(key[:]), nil
}
