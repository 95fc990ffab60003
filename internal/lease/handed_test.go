package lease

import (
	"math"
	"testing"
	"time"
)

// TestHandedLease checks which grant messages a waiter takes, and how a
// message sets the lease: from the send time of the waiter's latest attempt,
// plus the wait the server measured between that attempt and the grant,
// unless that wait is longer than the one seen locally (the server clock
// stepped) or negative. A message for an earlier entry, for a grant made
// before the latest attempt, after an attempt whose reply was lost, or that
// does not parse, is no grant.
func TestHandedLease(t *testing.T) {
	c := New(Config{Prefix: "p:"})
	ttl := time.Minute
	sent := time.Now().Add(-time.Second) // the local wait: a second
	deadline := func(wait time.Duration) time.Time { return sent.Add(wait).Add(ttl - c.drift(ttl)) }
	const server = 1_000_000_000 // µs on the server clock at the latest attempt: 1000 s
	for _, tc := range []struct {
		name   string
		msg    string
		server int64
		want   time.Time // the deadline; zero for no grant
	}{
		{"after the attempt", "ID.1 - 1000 250000", server, deadline(250 * time.Millisecond)},
		{"at the attempt", "ID.1 - 1000 0", server, deadline(0)},
		{"clock stepped forward", "ID.1 - 1005 0", server, deadline(0)},
		{"before the attempt", "ID.1 - 999 999999", server, time.Time{}},
		{"earlier entry", "ID.0 - 1000 250000", server, time.Time{}},
		{"later entry", "ID.2 - 1000 250000", server, time.Time{}},
		{"reply lost", "ID.1 - 1000 250000", math.MaxInt64, time.Time{}},
		{"bare ticket", "ID.1", server, time.Time{}},
		{"no generation", "ID - 1000 250000", server, time.Time{}},
		{"micros too large", "ID.1 - 1000 1000000", server, time.Time{}},
		{"negative micros", "ID.1 - 1000 -1", server, time.Time{}},
		{"seconds not a number", "ID.1 - x 0", server, time.Time{}},
		{"negative seconds", "ID.1 - -1 0", server, time.Time{}},
		{"extra field", "ID.1 - 1000 0 extra", server, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &acquire{c: c, ctx: t.Context(), keys: c.lockKeys("job"), owner: "owner", ttl: ttl}
			e := a.newEntry("ID", "chan")
			e.gen, e.place, e.sent, e.server = 1, "1", sent, tc.server
			w := &waiter{acquire: *a, entry: e}
			h, err := w.handed(tc.msg)
			switch {
			case err != nil:
				t.Fatalf("%q: %v", tc.msg, err)
			case tc.want.IsZero() && h != nil:
				t.Fatalf("%q: got a lease to %v, want no grant", tc.msg, h.Deadline())
			case !tc.want.IsZero() && h == nil:
				t.Fatalf("%q: got no grant, want a lease to %v", tc.msg, tc.want)
			case h != nil && !h.Deadline().Equal(tc.want):
				t.Fatalf("%q: lease to %v, want %v", tc.msg, h.Deadline(), tc.want)
			}
		})
	}
}
