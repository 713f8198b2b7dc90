// Package rules holds the pure decision logic that OpenClaw's session tools
// share: session-key parsing and classification, visibility and
// agent-to-agent policy, send policy, and tool-parameter reading.
//
// It does no I/O and knows nothing about NATS, so every rule can be tested in
// isolation and every tool handler applies exactly the same rule. Literal
// strings (error messages, sentinel keys) match OpenClaw's session tools
// byte for byte, because agents and acceptance tests match on them.
package rules
