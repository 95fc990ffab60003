package etcdtokens_test

import (
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/correctness/etcdtokens"
	"github.com/leasekit/leasekit/internal/testkit/etcdtest"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// BenchmarkAcquireRelease is what a grant costs with each source: an
// uncontended TryAcquire + Release on a real redis-server, with the Redis
// counter and with etcd's tokens, beside the etcd transaction alone (the
// cost the etcd source adds, and more: the stamp is one Redis round trip).
// The figures go in docs/fencing.md ("Where tokens come from"); go run
// ./bench -etcd has the same with ratios to references of the same run.
func BenchmarkAcquireRelease(b *testing.B) {
	server := redistest.Start(b)
	cli := client(b, etcdtest.Shared(b))
	prefix := "bench/" + time.Now().Format(time.RFC3339Nano) + "/"
	src := etcdtokens.New(cli, etcdtokens.WithPrefix(prefix))
	for _, tc := range []struct {
		name string
		opts []correctness.Option
	}{
		{"redis-counter", nil},
		{"etcd", []correctness.Option{correctness.WithTokens(src)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := correctness.New(server.Client(b), append(tc.opts, correctness.WithLogger(quiet), correctness.WithAudit(false))...)
			defer l.Close()
			ctx := b.Context()
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
	}
	b.Run("etcd-token-alone", func(b *testing.B) {
		ctx := b.Context()
		for b.Loop() {
			if _, err := src.Token(ctx, "alone", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
