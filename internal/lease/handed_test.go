package lease

import (
	"testing"
	"time"
)

// TestHandedLease checks how a grant message sets the lease: from the send
// time of the attempt that queued the waiter, plus the wait the server
// measured between the entry's place and the grant, unless that wait is
// longer than the one seen locally (the server clock stepped) or negative;
// and a message that does not parse, or names another place, is no grant.
func TestHandedLease(t *testing.T) {
	c := New(Config{Prefix: "p:"})
	lk := c.lockKeys("job")
	const place = 1_000_000_000 // µs on the server clock
	ttl := time.Minute
	queued := time.Now().Add(-time.Second) // the local wait: a second
	start := func(wait time.Duration) time.Time { return queued.Add(wait).Add(ttl - c.Drift(ttl)) }
	for _, tc := range []struct {
		msg  string
		want time.Time // the deadline; zero for no grant
	}{
		{"t - 1000000000 1000 250000", start(250 * time.Millisecond)},
		{"t - 1000000000 1000 0", start(0)},
		{"t - 1000000000 999 999999", start(0)},     // place ahead of the clock
		{"t - 1000000000 1005 0", start(0)},         // five seconds: the clock stepped
		{"t - 1000000000 250000", time.Time{}},      // the old form, no seconds
		{"t - 1000000001 1000 250000", time.Time{}}, // another place
		{"t - 1000000000 1000 1000000", time.Time{}},
		{"t - 1000000000 1000 -1", time.Time{}},
		{"t - 1000000000 x 0", time.Time{}},
		{"t - 1000000000 -1 0", time.Time{}},
		{"t - 1000000000 1000 0 extra", time.Time{}},
	} {
		h, err := c.handed(t.Context(), lk, "owner", ttl, tc.msg, place, queued)
		switch {
		case err != nil:
			t.Errorf("%q: %v", tc.msg, err)
		case tc.want.IsZero() && h != nil:
			t.Errorf("%q: got a lease to %v, want no grant", tc.msg, h.Deadline())
		case !tc.want.IsZero() && h == nil:
			t.Errorf("%q: got no grant, want a lease to %v", tc.msg, tc.want)
		case h != nil && !h.Deadline().Equal(tc.want):
			t.Errorf("%q: lease to %v, want %v", tc.msg, h.Deadline(), tc.want)
		}
	}
}
