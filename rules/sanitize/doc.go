// Package sanitize holds the text rules that every session tool shares: the
// assistant-visible-text sanitizer (VisibleText), credential redaction
// (Redactor), UTF-16 aware truncation, per-message history sanitization and
// the sessions_history byte caps.
//
// The package is pure: no I/O, no NATS, no global mutable state, and every
// exported function is safe for concurrent use.
//
// Behaviour follows OpenClaw's TypeScript implementation, which the comments
// in this package call the reference (the history sanitizer, the redactor,
// truncation and the visible-text profiles; docs/tools.md says what each does
// to a tool result).
// JavaScript strings are sequences of UTF-16 code units while Go strings are
// UTF-8 bytes; wherever the reference measures a length (the 4000-char history
// limit, the 18-char masking threshold, the 32768/16384 redaction chunks) this
// package counts UTF-16 code units (see utf16.go). Positions handed between
// functions are byte offsets; they are only ever compared with each other, so
// the two encodings agree on every ordering decision.
//
// Every scanner here is linear in its input. Go's regexp (RE2) has no
// back-references or lookaround, and several of the reference's regular
// expressions are quadratic under V8 on adversarial input, so the tag,
// code-region and scaffolding rules are hand-written scanners that reproduce
// the reference's matching semantics without rescanning.
package sanitize
