package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errLost = errors.New("lost")

// TestLeaseContextSeesAPassedDeadline: fn's context is cancelled, with a
// LockLost cause, on the first look fn takes at it once the lease's deadline
// has passed, with no help from the keeper's goroutine, which is not running
// here (in a process resumed after a pause, it may run only after fn's next
// lines). A released lease, or a hold whose fn has returned, is not lost.
func TestLeaseContextSeesAPassedDeadline(t *testing.T) {
	looks := map[string]func(ctx context.Context) bool{
		"Err":   func(ctx context.Context) bool { return ctx.Err() != nil },
		"Done":  func(ctx context.Context) bool { return isClosed(ctx.Done()) },
		"Cause": func(ctx context.Context) bool { return context.Cause(ctx) != nil },
	}
	for name, look := range looks {
		t.Run(name, func(t *testing.T) {
			ctx, h, k := heldContext(t)
			if look(ctx) {
				t.Fatal("done before the deadline")
			}
			h.mu.Lock()
			h.deadline = time.Now().Add(-time.Millisecond)
			h.mu.Unlock()
			if !look(ctx) {
				t.Fatal("not done on the first look past the deadline")
			}
			if cause := context.Cause(ctx); !errors.Is(cause, errLost) {
				t.Fatalf("cause: got %v, want LockLost", cause)
			}
			if k.loss.Load() == nil {
				t.Fatal("the keeper was not told of the loss")
			}
		})
	}
	t.Run("released", func(t *testing.T) {
		ctx, h, _ := heldContext(t)
		h.mu.Lock()
		h.deadline, h.released = time.Time{}, true
		h.mu.Unlock()
		if err := ctx.Err(); err != nil {
			t.Fatalf("a lease fn released itself: got %v, want not done", err)
		}
	})
	t.Run("fn returned", func(t *testing.T) {
		ctx, h, k := heldContext(t)
		close(k.stop)
		h.mu.Lock()
		h.deadline = time.Now().Add(-time.Millisecond)
		h.mu.Unlock()
		if cause := context.Cause(ctx); cause != nil {
			t.Fatalf("after fn returned: got %v, want no loss", cause)
		}
	})
}

// heldContext returns fn's context for a lease held for an hour, with no
// keeper goroutine behind it.
func heldContext(t *testing.T) (context.Context, *Held, *keeper) {
	c := New(Config{Prefix: "p:", Errors: Errors{LockLost: errLost}})
	h := &Held{core: c, keys: c.lockKeys("job"), value: "owner", deadline: time.Now().Add(time.Hour), ttl: time.Hour}
	inner, cancel := context.WithCancelCause(t.Context())
	t.Cleanup(func() { cancel(nil) })
	k := &keeper{h: h, ctx: inner, cancel: cancel, stop: make(chan struct{})}
	return &leaseContext{Context: inner, k: k}, h, k
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
