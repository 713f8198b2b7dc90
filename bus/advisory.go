package bus

import "github.com/nats-io/nats.go"

// StreamDeletedSubject is where the server announces that a stream (or the
// stream behind a KV bucket) was deleted.
func StreamDeletedSubject(stream string) string {
	return "$JS.EVENT.ADVISORY.STREAM.DELETED." + stream
}

// OnStreamDeleted calls fn each time the server announces that stream was
// deleted (by an operator's `nats stream rm` or `nats kv del`, say). A
// client that keeps state derived from a stream, or a consumer on it, has
// nothing else to tell it: a KV watch or a pull consumer on a deleted
// stream goes quiet or retries forever, and the state it built is stale.
// fn runs on the subscription's goroutine, one event at a time.
func OnStreamDeleted(nc *nats.Conn, stream string, fn func()) (*nats.Subscription, error) {
	return nc.Subscribe(StreamDeletedSubject(stream), func(*nats.Msg) { fn() })
}
