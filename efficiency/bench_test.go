package efficiency_test

import (
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// BenchmarkUncontended compares an uncontended TryObtain + Release with two
// PING round trips, the physical minimum, on the same redis-server in the same
// run. Read the ratio of the two ns/op figures, not the figures alone.
func BenchmarkUncontended(b *testing.B) {
	be := redistest.Real(b)
	ctx := b.Context()
	l := efficiency.New(be.Client)
	defer l.Close()
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
	b.Run("tryobtain+release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lock, err := l.TryObtain(ctx, "bench", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := lock.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
