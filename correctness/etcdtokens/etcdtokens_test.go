package etcdtokens_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/correctness/etcdtokens"
	"github.com/leasekit/leasekit/internal/testkit/etcdtest"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var quiet = slog.New(slog.DiscardHandler)

// client returns an etcd client of endpoints, closed when the test ends.
func client(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestTokensGrowFromTheFloor: the first token of a lock is its floor plus
// the revision of the write that created its key; later ones keep that base
// (a smaller floor changes nothing) and grow with every draw, and locks
// draw from keys of their own.
func TestTokensGrowFromTheFloor(t *testing.T) {
	cli := client(t, etcdtest.Shared(t))
	ctx := t.Context()
	prefix := "test/" + t.Name() + "/" + time.Now().Format(time.RFC3339Nano) + "/"
	src := etcdtokens.New(cli, etcdtokens.WithPrefix(prefix))
	const floor = 1_796_486_682_038_811
	first, err := src.Token(ctx, "a", floor)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := cli.Get(ctx, src.Key("a"))
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("Get %s: %v, %v", src.Key("a"), kv, err)
	}
	if string(kv.Kvs[0].Value) != "1796486682038811" || first != floor+uint64(kv.Kvs[0].ModRevision) {
		t.Fatalf("first token %d, key holds %q at revision %d: want the floor as the base, and base + revision",
			first, kv.Kvs[0].Value, kv.Kvs[0].ModRevision)
	}
	last := first
	for i := range 20 {
		name := "a"
		if i%2 == 1 {
			name = "b"
		}
		tok, err := src.Token(ctx, name, 5)
		if err != nil {
			t.Fatal(err)
		}
		if name == "a" {
			if tok <= last {
				t.Fatalf("draw %d of a: token %d, want above %d", i, tok, last)
			}
			last = tok
		} else if tok >= floor {
			t.Fatalf("b, created with floor 5: token %d, want 5 + a revision", tok)
		}
	}
}

// TestBadKeyAndOutage: a key that holds no base fails the draw, naming it;
// an etcd that cannot answer fails it with the ctx's error, or with the
// client's Unavailable when the connection it had breaks (the client does
// not resend a write).
func TestBadKeyAndOutage(t *testing.T) {
	cli := client(t, etcdtest.Shared(t))
	ctx := t.Context()
	prefix := "test/" + t.Name() + "/" + time.Now().Format(time.RFC3339Nano) + "/"
	src := etcdtokens.New(cli, etcdtokens.WithPrefix(prefix))
	if _, err := cli.Put(ctx, src.Key("forged"), "zero"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Token(ctx, "forged", 1); err == nil || !strings.Contains(err.Error(), src.Key("forged")) || !strings.Contains(err.Error(), `"zero"`) {
		t.Fatalf("a key holding text: %v, want an error naming the key and what it holds", err)
	}

	c := etcdtest.Start(t, 1)
	down := client(t, c.Endpoints())
	c.Kill(t, 0)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := etcdtokens.New(down).Token(short, "x", 1)
	unavailable := false
	if s, ok := status.FromError(err); ok {
		unavailable = s.Code() == codes.Unavailable
	}
	if !errors.Is(err, context.DeadlineExceeded) && !unavailable || !strings.Contains(err.Error(), `lock "x"`) {
		t.Fatalf("etcd down: %v, want an error naming the lock and matching DeadlineExceeded or Unavailable", err)
	}
}

// TestNilClient: New panics on a nil client, as correctness.New does.
func TestNilClient(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(nil) did not panic")
		}
	}()
	etcdtokens.New(nil)
}

// TestDoubleTokenScenario is the failure the Redis counter cannot help: the
// lock's Redis restarts without persistence while its server clock is
// stepped back (or, without the clock floor, restarts at all). Holder A
// drew its token and paused before writing; B acquires the lost lock and
// writes; A wakes and writes. With the Redis counter, B's token is not
// above A's, and the resource (a Register on a Redis of its own) accepts
// both holders' writes, A's stale one last; with etcd's tokens, B's is
// above A's and A's write is refused.
func TestDoubleTokenScenario(t *testing.T) {
	endpoints := etcdtest.Shared(t)
	cases := []struct {
		name      string
		opts      []correctness.Option
		step      time.Duration // the lock server's clock, at its restart
		etcd      bool
		wantStale bool // A's stale write is accepted
	}{
		{"redis counter, clock floor, clock stepped back 1m", nil, -time.Minute, false, true},
		{"redis counter without the clock floor", []correctness.Option{correctness.WithClockFloor(false)}, 0, false, true},
		{"etcd, clock stepped back 1m", nil, -time.Minute, true, false},
		{"etcd without the clock floor", []correctness.Option{correctness.WithClockFloor(false)}, 0, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			lockServer, clock := redistest.StartWithClock(t)
			resource := correctness.NewRegister(redistest.Start(t).Client(t))
			opts := append([]correctness.Option{correctness.WithLogger(quiet), correctness.WithAudit(false)}, tc.opts...)
			if tc.etcd {
				prefix := "test/" + t.Name() + "/" + time.Now().Format(time.RFC3339Nano) + "/"
				opts = append(opts, correctness.WithTokens(etcdtokens.New(client(t, endpoints), etcdtokens.WithPrefix(prefix))))
			}
			// Two processes' Lockers.
			la := correctness.New(lockServer.Client(t), opts...)
			lb := correctness.New(lockServer.Client(t), opts...)
			defer la.Close()
			defer lb.Close()

			a, err := la.Acquire(ctx, "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			// A pauses here. The lock's server restarts and forgets it.
			clock.Step(t, tc.step)
			if err := lockServer.Restart(); err != nil {
				t.Fatal(err)
			}
			b, err := lb.Acquire(ctx, "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			errB := resource.Write(ctx, "account", b.Token(), []byte("B"))
			errA := resource.Write(ctx, "account", a.Token(), []byte("A, stale"))
			value, writer, _ := resource.Read(ctx, "account")
			t.Logf("A's token %d, B's %d; B wrote: %v; A (stale) wrote: %v; the resource holds %q from token %d",
				a.Token(), b.Token(), errB, errA, value, writer)
			if errB != nil {
				t.Fatalf("B, the live holder, could not write: %v", errB)
			}
			switch {
			case tc.wantStale && errA != nil:
				t.Fatalf("A's stale write was refused (%v): the scenario did not break the Redis counter", errA)
			case !tc.wantStale && !errors.Is(errA, correctness.ErrStaleToken):
				t.Fatalf("A's stale write: %v, want ErrStaleToken", errA)
			case !tc.wantStale && b.Token() <= a.Token():
				t.Fatalf("B's token %d is not above A's %d", b.Token(), a.Token())
			}
		})
	}
}
