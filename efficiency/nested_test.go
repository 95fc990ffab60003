package efficiency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestNestedHoldOutlivesTheOuterLoss: a lock held inside another lock's fn
// keeps its own lease alive after the outer lease is lost, until its own fn
// returns. The outer loss cancels the inner fn's context, with a cause that
// matches ErrLockLost, but it is not the inner lease's loss: that lease must
// hold while the inner fn winds down, and is released when it returns.
func TestNestedHoldOutlivesTheOuterLoss(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		const ttl = 300 * time.Millisecond // refreshed every 100 ms
		outer, err := l.TryObtain(ctx, "outer", ttl)
		if err != nil {
			t.Fatal(err)
		}
		var innerErr error
		outerErr := outer.Hold(ctx, func(octx context.Context) error {
			inner, err := l.TryObtain(octx, "inner", ttl)
			if err != nil {
				return err
			}
			innerErr = inner.Hold(octx, func(ictx context.Context) error {
				b.Client.Del(ctx, outer.Key())
				<-ictx.Done() // the outer keeper found its lease gone
				// Winding down: the inner lease must still be refreshed.
				for range 2 {
					if !refreshed(inner, 30*time.Second) {
						t.Error("the inner lease was not refreshed after the outer lease was lost")
						return nil
					}
				}
				return nil
			})
			return innerErr
		})
		if !errors.Is(outerErr, efficiency.ErrLockLost) {
			t.Fatalf("outer Hold: got %v, want ErrLockLost", outerErr)
		}
		if innerErr != nil {
			t.Fatalf("inner Hold: got %v, want nil: its own lease was kept and released", innerErr)
		}
		if n := b.Client.Exists(ctx, "leasekit:{inner}").Val(); n != 0 {
			t.Fatal("the inner lock was not released")
		}
	})
}

// refreshed waits up to bound (a bound for a hung test, not a timing
// assertion) for lock's deadline to move, and reports whether it did.
func refreshed(lock *efficiency.Lock, bound time.Duration) bool {
	from := lock.Deadline()
	for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if lock.Deadline().After(from) {
			return true
		}
	}
	return false
}
