package correctness_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestTakenIsNotAnEndedContext: every acquire tells "another owner holds
// it" (ErrTaken, which matches ErrNotObtained too) from "the call's context
// ended" (ErrNotObtained and ctx.Err(), never ErrTaken), with one errors.Is:
// a lock's and an election's.
func TestTakenIsNotAnEndedContext(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		holder, err := l.TryAcquire(ctx, "taken", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = holder.Release(ctx) }()
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		soon, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		defer stop()
		ended := func(what string, want error, err error) {
			t.Helper()
			if errors.Is(err, correctness.ErrTaken) || !errors.Is(err, correctness.ErrNotObtained) || !errors.Is(err, want) {
				t.Errorf("%s with an ended ctx: %v; want ErrNotObtained and %v, not ErrTaken", what, err, want)
			}
		}

		_, err = l.TryAcquire(ctx, "taken", time.Minute)
		if !errors.Is(err, correctness.ErrTaken) || !errors.Is(err, correctness.ErrNotObtained) {
			t.Errorf("TryAcquire of a held lock: %v; want ErrTaken and ErrNotObtained", err)
		}
		_, err = l.TryAcquire(cancelled, "taken", time.Minute)
		ended("TryAcquire", context.Canceled, err)
		_, err = l.Acquire(soon, "taken", time.Minute)
		ended("Acquire", context.DeadlineExceeded, err)
		err = l.Do(cancelled, "taken", time.Minute, func(context.Context, uint64) error { return nil })
		ended("Do", context.Canceled, err)
		err = l.Campaign(cancelled, "taken", time.Minute, nil, func(context.Context, uint64) error { return nil })
		ended("Campaign", context.Canceled, err)
	})
}
