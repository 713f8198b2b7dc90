package bus

import "time"

// PullExpiry and PullHeartbeat are what the shared pull consumers (the
// gateways' run queue, the workers' cron ticks) ask of each pull: expire
// in 10 s, send a heartbeat each second while idle.
//
// A pull sent while a new consumer's replicas still elect a leader gets
// "no responders", and nats.go asks again only once it has missed two of
// the server's heartbeats. With the client's defaults (a 30 s pull, a
// 15 s heartbeat) a process that started beside the one creating the
// consumer sat idle for 30 s: a cron job firing each second missed every
// tick of it. With these, a lost pull is asked again within 2 s.
const (
	PullExpiry    = 10 * time.Second
	PullHeartbeat = time.Second
)
