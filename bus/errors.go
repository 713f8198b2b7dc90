package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Error codes carried in the micro error headers (Nats-Service-Error-Code).
const (
	CodeBadRequest   = 400
	CodeUnauthorized = 401
	CodeForbidden    = 403
	CodeNotFound     = 404
	CodeTooLarge     = 413
	// CodeTooManyRequests is a caller over one of its quotas; the error
	// says when to retry (Error.RetryAfterMs, the Retry-After headers).
	CodeTooManyRequests = 429
	CodeInternal        = 500
	CodeUnavailable     = 503
	MaxRequestBytes     = 1 << 20 // payloads above this are refused with 413
	HeaderToken         = "Sessionbus-Token"
	HeaderServiceErr    = "Nats-Service-Error"
	HeaderServiceCode   = "Nats-Service-Error-Code"
	// HeaderRetryAfter is HTTP's: whole seconds, rounded up.
	// HeaderRetryAfterMs is the milliseconds, the header OpenAI's and
	// Azure's APIs send beside it, for a client that wants the exact wait.
	HeaderRetryAfter   = "Retry-After"
	HeaderRetryAfterMs = "Retry-After-Ms"
)

// Error is a thrown tool error: it becomes a micro error reply with Code and
// Message, and never carries internal detail such as a stack trace.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"error"`
	// RetryAfterMs, on a 429, is how long the caller should wait before
	// the call can pass (the message says it too).
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`

	// reason is a 429's message without its wait, and hold how long the
	// service holds the reply (see Hold).
	reason string
	hold   time.Duration
}

func (e *Error) Error() string { return e.Message }

// RetryAfter is how long to wait before retrying; 0 when the error does
// not say (anything but a 429).
func (e *Error) RetryAfter() time.Duration { return time.Duration(e.RetryAfterMs) * time.Millisecond }

// TooManyRequests is the 429 of a caller over a quota: msg says which,
// and the message ends with the wait, rounded up to a millisecond.
func TooManyRequests(retry time.Duration, msg string) *Error {
	e := &Error{Code: CodeTooManyRequests, reason: msg}
	e.setRetry(retry)
	return e
}

func (e *Error) setRetry(retry time.Duration) {
	ms := max(int64((retry+time.Millisecond-1)/time.Millisecond), 1)
	e.RetryAfterMs = ms
	e.Message = fmt.Sprintf("%s; retry after %v", e.reason, time.Duration(ms)*time.Millisecond)
}

// Hold marks a 429 to be sent d later, for a caller that came back before
// its retry-after was over: a loop that ignores the wait. The service
// holds the reply (when it can: see DefaultMaxHeldReplies), so each of the
// loop's requests in flight costs it d instead of a round trip, and the
// retry-after the reply carries is what is left of the wait then. A
// caller that honours the wait never gets a held reply.
func (e *Error) Hold(d time.Duration) *Error {
	e.hold = d
	return e
}

// Holding is how long the service holds the reply (0: it answers at once).
func (e *Error) Holding() time.Duration { return e.hold }

// heldFor is the 429 as it is sent after being held for d: its wait is
// what is left.
func (e *Error) heldFor(d time.Duration) *Error {
	out := *e
	out.hold = 0
	out.setRetry(e.RetryAfter() - d)
	return &out
}

// Errorf builds a thrown error with a code.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is the common case: the caller's arguments are wrong.
func BadRequest(msg string) *Error { return &Error{Code: CodeBadRequest, Message: msg} }

// InputFault is an error the request's input caused, whose text is meant
// for the caller (rules.InputError is one; it implements this instead of
// importing bus, so the rules stay free of transport).
type InputFault interface {
	error
	InputFault() string
}

// Thrown is err as the requester sees it: an InputFault anywhere in its
// chain becomes the 400 with its text, anything else is returned as it is.
func Thrown(err error) error {
	var f InputFault
	if errors.As(err, &f) {
		return BadRequest(f.InputFault())
	}
	return err
}

// AsError extracts a *Error from err; anything else is an internal fault
// whose detail is logged by the caller and hidden from the requester.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// ErrorMsg carries a thrown error the way micro's Request.Error does, with
// the retry-after headers of a 429.
func ErrorMsg(e *Error) *nats.Msg {
	body, _ := json.Marshal(e)
	h := nats.Header{HeaderServiceErr: []string{e.Message}, HeaderServiceCode: []string{strconv.Itoa(e.Code)}}
	if e.RetryAfterMs > 0 {
		h.Set(HeaderRetryAfterMs, strconv.FormatInt(e.RetryAfterMs, 10))
		h.Set(HeaderRetryAfter, strconv.FormatInt((e.RetryAfterMs+999)/1000, 10))
	}
	return &nats.Msg{Header: h, Data: body}
}

// replyError is the thrown error a reply carries, nil when it carries none
// (the reverse of errorMsg).
func replyError(reply *nats.Msg) *Error {
	desc, code := reply.Header.Get(HeaderServiceErr), reply.Header.Get(HeaderServiceCode)
	if desc == "" && code == "" {
		return nil
	}
	e := &Error{Message: desc, Code: CodeInternal}
	if c, err := strconv.Atoi(code); err == nil && c != 0 {
		e.Code = c
	}
	if ms, err := strconv.ParseInt(reply.Header.Get(HeaderRetryAfterMs), 10, 64); err == nil && ms > 0 {
		e.RetryAfterMs = ms
	} else if sec, err := strconv.ParseInt(reply.Header.Get(HeaderRetryAfter), 10, 64); err == nil && sec > 0 {
		e.RetryAfterMs = sec * 1000
	}
	return e
}
