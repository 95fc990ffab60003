package correctness_test

import (
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// BenchmarkUncontended compares an uncontended TryAcquire + Release, and a
// Register write, with PING round trips on the same redis-server in the same
// run. Read the ratios, not the figures alone.
func BenchmarkUncontended(b *testing.B) {
	be := redistest.Real(b)
	ctx := b.Context()
	l := correctness.New(be.Client, correctness.WithAudit(false))
	defer l.Close()
	reg := correctness.NewRegister(be.Client)
	b.Run("two-pings", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := be.Client.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			if err := be.Client.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tryacquire+release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lease, err := l.TryAcquire(ctx, "bench", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("register-write", func(b *testing.B) {
		b.ReportAllocs()
		value := []byte("value")
		for b.Loop() {
			// An equal token is accepted: the same holder writing again.
			if err := reg.Write(ctx, "bench", 1, value); err != nil {
				b.Fatal(err)
			}
		}
	})
}
