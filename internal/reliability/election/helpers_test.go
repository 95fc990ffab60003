package election_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// The helpers below are correctness's own election test helpers
// (correctness/election_test.go), copied: a test package of one module
// cannot import another's.

var quiet = slog.New(slog.DiscardHandler)

func newLocker(t *testing.T, b *redistest.Backend, opts ...correctness.Option) *correctness.Locker {
	t.Helper()
	l := correctness.New(b.Client, append([]correctness.Option{correctness.WithLogger(quiet)}, opts...)...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// electionWait bounds every wait of the election tests: a bound for a hung
// test, far above any handoff or recheck, not a timing assertion.
const electionWait = 30 * time.Second

// candidate is a Campaign running in a goroutine: it reports its term when
// it takes office, and leads until resign is closed or its term is lost.
type candidate struct {
	value  string
	led    chan uint64   // its term, once in office
	resign chan struct{} // closed: fn returns
	lost   chan error    // fn's context's cause, when it ended before resign
	done   chan error    // Campaign's error
}

// campaign starts a candidate with value on l.
func campaign(ctx context.Context, l *correctness.Locker, name string, ttl time.Duration, value string) *candidate {
	c := &candidate{value: value, led: make(chan uint64, 1), resign: make(chan struct{}), lost: make(chan error, 1), done: make(chan error, 1)}
	go func() {
		c.done <- l.Campaign(ctx, name, ttl, []byte(value), func(ctx context.Context, term uint64) error {
			c.led <- term
			select {
			case <-c.resign:
				return nil
			case <-ctx.Done():
				c.lost <- context.Cause(ctx)
				return ctx.Err()
			}
		})
	}()
	return c
}

// term waits for the candidate to take office and returns its term.
func (c *candidate) term(t *testing.T) uint64 {
	t.Helper()
	select {
	case term := <-c.led:
		return term
	case err := <-c.done:
		t.Fatalf("candidate %s: Campaign ended before it led: %v", c.value, err)
	case <-time.After(electionWait):
		t.Fatalf("candidate %s did not lead within %v", c.value, electionWait)
	}
	return 0
}

// end makes the candidate resign and returns Campaign's error.
func (c *candidate) end(t *testing.T) error {
	t.Helper()
	close(c.resign)
	return c.result(t)
}

// result waits for Campaign to return.
func (c *candidate) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(electionWait):
		t.Fatalf("candidate %s: Campaign did not return within %v", c.value, electionWait)
	}
	return nil
}

// next waits for the observer's next Leader.
func next(t *testing.T, seen <-chan correctness.Leader) correctness.Leader {
	t.Helper()
	select {
	case v, ok := <-seen:
		if !ok {
			t.Fatal("the observer's channel closed")
		}
		return v
	case <-time.After(electionWait):
		t.Fatalf("the observer saw no change within %v", electionWait)
	}
	return correctness.Leader{}
}

func show(v correctness.Leader) string {
	if v.Term == 0 && v.Value == nil {
		return "none"
	}
	return fmt.Sprintf("%q@%d", v.Value, v.Term)
}
