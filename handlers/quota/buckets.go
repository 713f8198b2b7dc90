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
	keys *simplelru.LRU[string, *bucket]
}

// bucket is one key's tokens, and when its last refusal told the caller
// to come back.
type bucket struct {
	lim     *rate.Limiter
	retryAt time.Time
}

func newBuckets(r float64, burst, maxKeys int) *buckets {
	keys, err := simplelru.NewLRU[string, *bucket](maxKeys, nil)
	if err != nil {
		panic("quota: maxKeys must be positive") // a programming error: New checks it
	}
	return &buckets{limit: rate.Limit(r), burst: burst, keys: keys}
}

// take takes one token from key's bucket at now. It returns the
// reservation (to give the token back with CancelAt if a later check
// refuses the call); or nil, how long until a token is there, and whether
// the caller came back before an earlier refusal's wait was over (it
// ignores the retry-after: a loop).
func (b *buckets) take(key string, now time.Time) (_ *rate.Reservation, wait time.Duration, early bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.keys.Get(key)
	if !ok {
		b.dropFull(now)
		bk = &bucket{lim: rate.NewLimiter(b.limit, b.burst)}
		b.keys.Add(key, bk)
	}
	// The tokens read here are still there for the reservation: every
	// take is under b.mu, and the only other change, a CancelAt giving a
	// token back, adds. A refused call takes nothing, and allocates
	// nothing: a flood is refused cheaply.
	if t := bk.lim.TokensAt(now); t < 1 {
		wait = time.Duration((1 - t) / float64(b.limit) * float64(time.Second))
		early = now.Before(bk.retryAt)
		bk.retryAt = now.Add(wait)
		return nil, wait, early
	}
	return bk.lim.ReserveN(now, 1), 0, false
}

// dropFull drops the full buckets at the old end.
func (b *buckets) dropFull(now time.Time) {
	for {
		_, bk, ok := b.keys.GetOldest()
		if !ok || bk.lim.TokensAt(now) < float64(b.burst) {
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
