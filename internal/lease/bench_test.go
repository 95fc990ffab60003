package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// BenchmarkEngine runs the engine's operations, on miniredis and on a real
// server, for each kind of lock and a semaphore: uncontended (an acquire and
// its release), a held lease's refresh and ttl, and handed over (a waiter
// queues behind the holder and is handed the lease by its release). It
// reports the round trips each makes (rt/op) beside its allocations: what a
// change to the engine must not raise. On miniredis the allocations include
// the server's own.
func BenchmarkEngine(b *testing.B) {
	b.Run("miniredis", func(b *testing.B) { benchmarkEngine(b, redistest.Mini) })
	b.Run("redis-server", func(b *testing.B) { benchmarkEngine(b, redistest.Real) })
}

func benchmarkEngine(b *testing.B, backend func(testing.TB) *redistest.Backend) {
	for _, tc := range []struct {
		name   string
		cfg    lease.Config
		limit  int // a semaphore's; 0 for a lock
		script string
	}{
		{"efficiency", lease.Config{Kind: "efficiency"}, 0, "wait"},
		{"fenced", lease.Config{Kind: "correctness", Fenced: true, ClockFloor: true}, 0, "wait"},
		{"semaphore", lease.Config{Kind: "efficiency"}, 1, "sem_wait"},
	} {
		b.Run(tc.name+"/uncontended", func(b *testing.B) {
			be := backend(b)
			acq := engineAcquirer(b, be, tc.cfg, tc.limit)
			count := redistest.Count(be.Client)
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				h, err := acq.try(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(count.Total())/float64(b.N), "rt/op")
		})
		b.Run(tc.name+"/refresh+ttl", func(b *testing.B) {
			be := backend(b)
			h, err := engineAcquirer(b, be, tc.cfg, tc.limit).try(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			count := redistest.Count(be.Client)
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if err := h.Refresh(ctx, time.Minute); err != nil {
					b.Fatal(err)
				}
				if _, err := h.TTL(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(count.Total())/float64(b.N), "rt/op")
		})
		b.Run(tc.name+"/handoff", func(b *testing.B) {
			be := backend(b)
			holder := engineAcquirer(b, be, tc.cfg, tc.limit)
			waiter := engineAcquirer(b, be, tc.cfg, tc.limit)
			count := redistest.Count(be.Client)
			ctx := b.Context()
			type result struct {
				h   *lease.Held
				err error
			}
			got := make(chan result)
			b.ReportAllocs()
			for b.Loop() {
				h, err := holder.try(ctx)
				if err != nil {
					b.Fatal(err)
				}
				attempts := count.Of(tc.script)
				go func() {
					h, err := waiter.obtain(ctx)
					got <- result{h, err}
				}()
				count.Await(b, tc.script, attempts+1) // queued behind the holder
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
				r := <-got
				if r.err != nil {
					b.Fatal(r.err)
				}
				if err := r.h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(count.Total())/float64(b.N), "rt/op")
		})
	}
}

// acquirer acquires one lock, or a permit of one semaphore.
type acquirer struct {
	try, obtain func(context.Context) (*lease.Held, error)
}

// engineAcquirer is an acquirer of a Core of its own on be, configured as
// cfg, of a lock, or of a semaphore of limit permits when limit is positive.
func engineAcquirer(b *testing.B, be *redistest.Backend, cfg lease.Config, limit int) acquirer {
	cfg.Client, cfg.Prefix = be.Client, "bench:"
	cfg.DriftFactor = lease.DefaultDriftFactor
	cfg.Errors = lease.Errors{NotObtained: errNotObtained}
	c := lease.New(cfg)
	b.Cleanup(func() { _ = c.Close() })
	const ttl = time.Minute
	if limit > 0 {
		s := c.Semaphore("bench", limit)
		return acquirer{
			try:    func(ctx context.Context) (*lease.Held, error) { return s.Try(ctx, ttl) },
			obtain: func(ctx context.Context) (*lease.Held, error) { return s.Obtain(ctx, ttl) },
		}
	}
	return acquirer{
		try:    func(ctx context.Context) (*lease.Held, error) { return c.Try(ctx, "bench", ttl) },
		obtain: func(ctx context.Context) (*lease.Held, error) { return c.Obtain(ctx, "bench", ttl) },
	}
}
