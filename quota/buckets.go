package quota

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// DefaultMaxKeys bounds the buckets one limit keeps on a worker. Only
// callers active in the last burst/rate seconds hold a bucket (the others
// are full, and a full bucket is the same as none), so the bound is met
// only when that many callers call within that window; it is a backstop,
// about 16 MiB at the measured size of a bucket and its key.
const DefaultMaxKeys = 1 << 16

// buckets are one limit's token buckets, by key (a session or an agent).
//
// A bucket is kept only while it is not full: one that has refilled holds
// nothing a fresh bucket would not, so it is dropped. Buckets are kept in
// least-recently-used order, and the oldest is the first to refill (all
// share one rate and burst): each new key drops the full buckets at the old
// end, so the buckets kept are those touched within the last burst/rate
// seconds, whatever the number of keys seen. Past maxKeys the oldest bucket
// is dropped even when not full; its caller starts again from a full burst,
// a small gift that only that many concurrently active callers can cause.
type buckets struct {
	limit rate.Limit
	burst int

	mu   sync.Mutex
	keys *simplelru.LRU[string, *rate.Limiter]
}

func newBuckets(r float64, burst, maxKeys int) *buckets {
	keys, err := simplelru.NewLRU[string, *rate.Limiter](maxKeys, nil)
	if err != nil {
		panic("quota: maxKeys must be positive") // a programming error: New checks it
	}
	return &buckets{limit: rate.Limit(r), burst: burst, keys: keys}
}

// take takes one token from key's bucket at now. It returns the
// reservation (to give the token back with CancelAt if a later check
// refuses the call), or nil and how long until a token is there.
func (b *buckets) take(key string, now time.Time) (*rate.Reservation, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lim, ok := b.keys.Get(key)
	if !ok {
		b.dropFull(now)
		lim = rate.NewLimiter(b.limit, b.burst)
		b.keys.Add(key, lim)
	}
	// Every use of a limiter is under b.mu, so the tokens read here are
	// still there for the reservation. A refused call takes nothing (and
	// allocates nothing: a flood is refused cheaply).
	if t := lim.TokensAt(now); t < 1 {
		return nil, time.Duration((1 - t) / float64(b.limit) * float64(time.Second))
	}
	return lim.ReserveN(now, 1), 0
}

// dropFull drops the full buckets at the old end.
func (b *buckets) dropFull(now time.Time) {
	for {
		_, lim, ok := b.keys.GetOldest()
		if !ok || lim.TokensAt(now) < float64(b.burst) {
			return
		}
		b.keys.RemoveOldest()
	}
}

// len is how many buckets are kept.
func (b *buckets) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.keys.Len()
}
