package efficiency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestTakenIsNotAnEndedContext: every acquire tells "another owner holds
// it" (ErrTaken, which matches ErrNotObtained too) from "the call's context
// ended" (ErrNotObtained and ctx.Err(), never ErrTaken), with one errors.Is.
func TestTakenIsNotAnEndedContext(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		holder := mustObtain(t)(l.TryObtain(ctx, "taken", time.Minute))
		defer func() { _ = holder.Release(ctx) }()
		sem := l.Semaphore("taken-sem", 1)
		permit := mustObtain(t)(sem.TryAcquire(ctx, time.Minute))
		defer func() { _ = permit.Release(ctx) }()
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		soon, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		defer stop()

		taken := func(what string, _ *efficiency.Lock, err error) {
			t.Helper()
			if !errors.Is(err, efficiency.ErrTaken) || !errors.Is(err, efficiency.ErrNotObtained) {
				t.Errorf("%s of a held lock: %v; want ErrTaken and ErrNotObtained", what, err)
			}
		}
		ended := func(what string, want error, err error) {
			t.Helper()
			if errors.Is(err, efficiency.ErrTaken) || !errors.Is(err, efficiency.ErrNotObtained) || !errors.Is(err, want) {
				t.Errorf("%s with an ended ctx: %v; want ErrNotObtained and %v, not ErrTaken", what, err, want)
			}
		}
		lk, err := l.TryObtain(ctx, "taken", time.Minute)
		taken("TryObtain", lk, err)
		lk, err = sem.TryAcquire(ctx, time.Minute)
		taken("Semaphore.TryAcquire", lk, err)

		_, err = l.TryObtain(cancelled, "taken", time.Minute)
		ended("TryObtain", context.Canceled, err)
		_, err = l.Obtain(soon, "taken", time.Minute)
		ended("Obtain", context.DeadlineExceeded, err)
		_, err = sem.TryAcquire(cancelled, time.Minute)
		ended("Semaphore.TryAcquire", context.Canceled, err)
		_, err = sem.Acquire(cancelled, time.Minute)
		ended("Semaphore.Acquire", context.Canceled, err)
		err = l.Do(cancelled, "taken", time.Minute, func(context.Context) error { return nil })
		ended("Do", context.Canceled, err)
		ran, err := l.Once(cancelled, "taken-once", time.Minute, func(context.Context) error { return nil })
		if ran {
			t.Error("Once with an ended ctx ran fn")
		}
		ended("Once", context.Canceled, err)
	})
}

// mustObtain fails the test on an error of an acquire.
func mustObtain(t *testing.T) func(*efficiency.Lock, error) *efficiency.Lock {
	return func(l *efficiency.Lock, err error) *efficiency.Lock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}
