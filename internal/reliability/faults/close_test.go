package faults_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestClosedLocker: after Close every new operation fails at once with
// ErrClosed, even on a free lock, and not with ErrNotObtained (nobody else
// holds it); a wait under way ends with ErrClosed; and a lock held before
// Close can still be refreshed and released.
func TestClosedLocker(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				l := k.open(t, b.Client, lockConfig{})
				held, err := l.try(ctx, "held", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				waiting := make(chan error, 1)
				count := redistest.Count(b.Client)
				go func() {
					_, err := l.obtain(ctx, "held", time.Minute)
					waiting <- err
				}()
				count.AwaitTotal(t, 2) // the probe and the subscribed try
				if err := l.close(); err != nil {
					t.Fatal(err)
				}
				if err := <-waiting; !errors.Is(err, k.closed) || errors.Is(err, k.notObtained) {
					t.Errorf("a wait ended by Close: got %v, want ErrClosed and not ErrNotObtained", err)
				}
				noop := func(context.Context) error { t.Error("fn ran on a closed Locker"); return nil }
				calls := map[string]func() error{
					"try":    func() error { _, err := l.try(ctx, "free", time.Minute); return err },
					"obtain": func() error { _, err := l.obtain(ctx, "free", time.Minute); return err },
					"do":     func() error { return l.do(ctx, "free", time.Minute, noop) },
				}
				if l.once != nil {
					calls["once"] = func() error { _, err := l.once(ctx, "free", time.Minute, noop); return err }
				}
				for op, call := range calls {
					if err := call(); !errors.Is(err, k.closed) || errors.Is(err, k.notObtained) {
						t.Errorf("%s after Close: got %v, want ErrClosed and not ErrNotObtained", op, err)
					}
				}
				if n := b.Client.Exists(ctx, lockKey("free")).Val(); n != 0 {
					t.Errorf("a closed Locker took a lock")
				}
				if err := held.refresh(ctx, 2*time.Minute); err != nil {
					t.Errorf("Refresh of a lock held before Close: %v", err)
				}
				if err := held.release(ctx); err != nil {
					t.Errorf("Release of a lock held before Close: %v", err)
				}
			})
		})
	}
}
