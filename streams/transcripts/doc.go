// Package transcripts stores session transcripts: one message per
// transcript entry in stream SB_TRANSCRIPTS on subject <prefix>.tr.<encKey>,
// body = the entry bytes, headers
//
//	Sb-Entry: <n>      0-based entry number within the session
//	Sb-Prev:  <seq>    on the first message of each append (single message or
//	                   atomic batch): stream seq of entry n-1, 0 if none.
//	                   Omitted on the other messages of an atomic batch, whose
//	                   previous entry is at seq-1 (batches commit contiguously).
//
// Every append is a compare-and-set on the session's subject
// (Nats-Expected-Last-Subject-Sequence = seq of the current last entry), so
// concurrent writers never interleave inside an append; the loser repairs its
// view of the index and retries. The entry→sequence index lives in KV (see
// transcript_index.go). Reads never scan by subject: they look the sequences
// up in the index and fetch the messages with pipelined direct gets, so a
// page costs O(limit) whatever the transcript's length or other sessions'
// traffic.
package transcripts
