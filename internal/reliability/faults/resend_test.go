package faults_test

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// resends is how many lost replies each subtest injects.
const resends = 10

// releaseRequest matches a proxy chunk that runs script s (by hash) on key,
// as a holder's release: not a break (ARGV[2] '2'; a lock's release has
// more than two KEYS, so the number of keys is never that bulk string).
func releaseRequest(s *scripts.Script, key string) func([]byte) bool {
	hash, k := bulk(s.Hash()), bulk(key)
	return func(chunk []byte) bool {
		if s == scripts.Release && bytes.Contains(chunk, k) && (plainDelete(chunk) || bytes.Contains(chunk, delIfEq)) {
			return true // an uncontended release: DELEX, DELIFEQ, or their script
		}
		return bytes.Contains(chunk, hash) && bytes.Contains(chunk, k) && !bytes.Contains(chunk, []byte("\r\n$1\r\n2\r\n$"))
	}
}

// delIfEq is the hash of the plain path's release where the server has no
// compare-and-delete.
var delIfEq = bulk(scripts.DelIfEq.Hash())

// plainDelete reports whether chunk sends DELEX or DELIFEQ (internal/lease's
// plain.go).
func plainDelete(chunk []byte) bool {
	c := bytes.ToLower(chunk)
	return bytes.Contains(c, []byte("\r\ndelex\r\n")) || bytes.Contains(c, []byte("\r\ndelifeq\r\n"))
}

// cutOnce arms p to lose the reply of the next request match accepts, and
// returns whether that happened.
func cutOnce(p *faultproxy.Proxy, match func([]byte) bool) *atomic.Bool {
	var fired atomic.Bool
	p.CutAfterRequest(func(chunk []byte) bool {
		if !match(chunk) {
			return false
		}
		fired.Store(true)
		return true
	})
	return &fired
}

// TestResentReleaseReportsTheRelease loses the reply of each release (go-redis
// sends it again on a fresh connection): Release, Do and Semaphore.Do report
// what the first send did, a release, never ErrNotHeld or ErrLockLost; and
// the lock is free.
func TestResentReleaseReportsTheRelease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			srv, direct := startServer(t)
			p := newProxy(t, srv.Addr)
			l := k.open(t, proxiedClient(t, p, false), lockConfig{})
			const name = "resent"
			for i := range resends {
				fired := cutOnce(p, releaseRequest(scripts.Release, lockKey(name)))
				if err := l.do(ctx, name, time.Minute, func(context.Context) error { return nil }); err != nil {
					t.Fatalf("Do %d: got %v, want nil: fn returned under a live lease", i, err)
				}
				g, err := l.try(ctx, name, time.Minute)
				if err != nil {
					t.Fatalf("try %d: %v (the lock is not free after Do)", i, err)
				}
				released := cutOnce(p, releaseRequest(scripts.Release, lockKey(name)))
				if err := g.release(ctx); err != nil {
					t.Fatalf("Release %d: got %v, want nil", i, err)
				}
				if !fired.Load() || !released.Load() {
					t.Fatalf("round %d: the proxy lost no release's reply", i)
				}
				if n := direct.Exists(ctx, lockKey(name)).Val(); n != 0 {
					t.Fatalf("round %d: the lock is still held", i)
				}
			}
		})
	}
	t.Run("semaphore", func(t *testing.T) {
		ctx := t.Context()
		srv, _ := startServer(t)
		if err := redistest.Script(scripts.SemRelease).Load(ctx, srv.Client(t)).Err(); err != nil {
			t.Fatal(err)
		}
		p := newProxy(t, srv.Addr)
		l := efficiency.New(proxiedClient(t, p, false), efficiency.WithLogger(quiet))
		t.Cleanup(func() { _ = l.Close() })
		s := l.Semaphore("resent", 2)
		for i := range resends {
			hash, key := bulk(scripts.SemRelease.Hash()), bulk(scripts.PermitsKey(lease.DefaultPrefix, "resent"))
			fired := cutOnce(p, func(chunk []byte) bool { return bytes.Contains(chunk, hash) && bytes.Contains(chunk, key) })
			if err := s.Do(ctx, time.Minute, func(context.Context) error { return nil }); err != nil {
				t.Fatalf("Semaphore.Do %d: got %v, want nil", i, err)
			}
			if !fired.Load() {
				t.Fatalf("round %d: the proxy lost no release's reply", i)
			}
		}
	})
}

// TestResentBreakEndsOneGrant: a lock is held by a holder that never
// releases, two waiters wait in Do, and an operator's Break loses its reply
// (go-redis sends it again). The first send ends the stuck grant and hands
// the lock to the first waiter; the second must leave that waiter's grant be
// and report the break. The two waiters' functions never run at once, and
// both run.
func TestResentBreakEndsOneGrant(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			srv, direct := startServer(t)
			p := newProxy(t, srv.Addr)
			operator := k.open(t, proxiedClient(t, p, false), lockConfig{})
			const name = "stuck"
			queue := scripts.QueueKey(lockKey(name))
			for i := range resends {
				stuck := k.open(t, srv.Client(t), lockConfig{})
				if _, err := stuck.try(ctx, name, time.Minute); err != nil {
					t.Fatalf("round %d: the stuck holder: %v", i, err)
				}
				var running, overlaps, ran atomic.Int32
				var wg sync.WaitGroup
				errs := make(chan error, 2)
				for w := range 2 {
					waiter := k.open(t, srv.Client(t), lockConfig{})
					wg.Go(func() {
						errs <- waiter.do(ctx, name, time.Minute, func(context.Context) error {
							if running.Add(1) > 1 {
								overlaps.Add(1)
							}
							time.Sleep(200 * time.Millisecond)
							running.Add(-1)
							ran.Add(1)
							return nil
						})
					})
					if !waitFor(10*time.Second, func() bool { return direct.ZCard(ctx, queue).Val() == int64(w+1) }) {
						t.Fatalf("round %d: waiter %d did not queue", i, w+1)
					}
				}
				fired := cutOnce(p, func(chunk []byte) bool {
					return bytes.Contains(chunk, bulk(scripts.Release.Hash())) && bytes.Contains(chunk, []byte("\r\n$1\r\n2\r\n$"))
				})
				broken, err := operator.brk(ctx, name)
				if err != nil || !broken {
					t.Fatalf("round %d: Break: got %v, %v, want true", i, broken, err)
				}
				if !fired.Load() {
					t.Fatalf("round %d: the proxy lost no break's reply", i)
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Errorf("round %d: a waiter's Do: %v", i, err)
					}
				}
				if n := overlaps.Load(); n > 0 || ran.Load() != 2 {
					t.Fatalf("round %d: the waiters' functions overlapped %d times, %d of 2 ran: the resent break ended the next grant", i, n, ran.Load())
				}
			}
		})
	}
}
