package correctness

import (
	"testing"
)

// TestToldKeepsTermOrder: whatever order reads find leaders in, an
// observer sends the first read whatever it found, then leaders in rising
// term order, the same leader again only with a new value or after a
// vacancy, none only after a leader, and nothing twice.
func TestToldKeepsTermOrder(t *testing.T) {
	a, b := Leader{Value: []byte("a"), Term: 5}, Leader{Value: []byte("b"), Term: 9}
	lead := func(x Leader) sighting { return sighting{state: leading, leader: x} }
	none, waits := sighting{state: free}, sighting{state: waiting}
	steps := []struct {
		s    sighting
		send bool
	}{
		{none, true},     // the first read: nobody leads
		{none, false},    // again: nothing new
		{lead(a), true},  // a takes office
		{lead(a), false}, // a read after a forged notice: nothing new
		{lead(b), true},  // b takes over from a
		{lead(a), false}, // a deposed leader's grant brought back by a failover
		{waits, true},    // b's leader key deleted: no leader for now
		{lead(b), true},  // b wrote it back: b again
		{lead(Leader{Value: []byte("b2"), Term: 9}), true}, // b proclaimed a new value
		{none, true},   // b left, nobody in line
		{waits, false}, // a candidate not yet in office
		{lead(Leader{Value: []byte("c"), Term: 12}), true},
	}
	var tl told
	for i, step := range steps {
		x, got := tl.next(step.s)
		if got != step.send {
			t.Fatalf("step %d (state %d, term %d): send %v, want %v", i+1, step.s.state, step.s.leader.Term, got, step.send)
		}
		if got && step.s.state == leading && (x.Term != step.s.leader.Term || string(x.Value) != string(step.s.leader.Value)) {
			t.Fatalf("step %d: sent %+v, want %+v", i+1, x, step.s.leader)
		}
		if got && step.s.state != leading && x.Term != 0 {
			t.Fatalf("step %d: sent %+v, want the zero Leader", i+1, x)
		}
	}
}
