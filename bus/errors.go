package bus

import (
	"errors"
	"fmt"
)

// Error codes carried in the micro error headers (Nats-Service-Error-Code).
const (
	CodeBadRequest    = 400
	CodeUnauthorized  = 401
	CodeForbidden     = 403
	CodeNotFound      = 404
	CodeTooLarge      = 413
	CodeInternal      = 500
	CodeUnavailable   = 503
	MaxRequestBytes   = 1 << 20 // payloads above this are refused with 413
	HeaderToken       = "Sessionbus-Token"
	HeaderServiceErr  = "Nats-Service-Error"
	HeaderServiceCode = "Nats-Service-Error-Code"
)

// Error is a thrown tool error: it becomes a micro error reply with Code and
// Message, and never carries internal detail such as a stack trace.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string { return e.Message }

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
