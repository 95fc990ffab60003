// Package backoff is the one way leasekit pauses between tries of something
// that failed (a Redis call, a subscription, a campaign): a pause that
// starts short and doubles up to a cap, so that a failure that passes costs
// little and one that lasts costs Redis one try per cap.
package backoff

import (
	"context"
	"time"
)

// Backoff is the pause before the next try. Its zero value is not usable:
// set First and Max.
type Backoff struct {
	// First is the first pause, and Max the longest: each pause after the
	// first doubles the one before, up to Max.
	First, Max time.Duration
	last       time.Duration
}

// Next returns the pause before the next try, and makes the one after it
// twice as long (at most Max).
func (b *Backoff) Next() time.Duration {
	b.last = min(max(2*b.last, b.First), b.Max)
	return b.last
}

// Reset makes the next pause First again, after a try that worked.
func (b *Backoff) Reset() { b.last = 0 }

// Sleep waits for the next pause, and reports false, at once, if ctx ends
// or done is closed first (done may be nil).
func (b *Backoff) Sleep(ctx context.Context, done <-chan struct{}) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-done:
		return false
	}
}
