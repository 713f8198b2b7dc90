package rules

// InputError is a "thrown" argument error in OpenClaw's sense (a
// ToolInputError): the caller sent something the tool cannot accept. The
// transport maps it to code 400 with Msg as the message, unlike "returned"
// errors, which are ordinary replies with status "error" or "forbidden".
//
// Every function in this package that rejects caller input returns a
// *InputError; detect it with errors.As.
type InputError struct {
	Msg string
}

func (e *InputError) Error() string { return e.Msg }

// InputFault is the text to answer the caller with: an InputError is the
// caller's fault, answered as a 400 (bus.Thrown).
func (e *InputError) InputFault() string { return e.Msg }

func inputError(msg string) error { return &InputError{Msg: msg} }
