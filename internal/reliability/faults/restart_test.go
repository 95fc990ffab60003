package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// holderTTL is long, so that a waiter that waits it out fails its test: a
// waiter must find a free lock within about a second (the recheck) whatever
// was lost. waitBound bounds each wait far below it; it is a bound for a
// hang, not a timing assertion.
const (
	holderTTL = time.Minute
	waitBound = 20 * time.Second
)

// TestWaitersAfterRestart: a holder and three waiters, each with its own
// client and Locker, and Redis goes down for a second and comes back without
// persistence. The queue, the holder's key and every subscription are gone,
// and no release will come; the waiters' tries meanwhile fail.
// Every waiter must still get the lock, in turn, long before the holder's
// ttl would have run out.
func TestWaitersAfterRestart(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			holder := k.open(t, srv.Client(t), lockConfig{})
			if _, err := holder.try(t.Context(), "job", holderTTL); err != nil {
				t.Fatal(err)
			}
			const waiters = 3
			got := make(chan error, waiters)
			ctx, cancel := context.WithTimeout(t.Context(), waitBound)
			defer cancel()
			started := make(chan struct{}, waiters)
			for i := range waiters {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr})
				t.Cleanup(func() { _ = c.Close() })
				l := k.open(t, c, lockConfig{})
				go func() {
					started <- struct{}{}
					g, err := l.obtain(ctx, "job", time.Minute)
					if err == nil {
						err = g.release(context.WithoutCancel(ctx))
					}
					if err != nil {
						err = fmt.Errorf("waiter %d: %w", i, err)
					}
					got <- err
				}()
			}
			for range waiters {
				<-started
			}
			waitQueued(t, srv, waiters)
			if err := srv.RestartAfter(time.Second); err != nil {
				t.Fatal(err)
			}
			for range waiters {
				if err := <-got; err != nil {
					t.Errorf("%v: want the lock well within %v of the restart, the holder's ttl being %v", err, waitBound, holderTTL)
				}
			}
		})
	}
}

// waitQueued waits until n queueing waiters, each of its own Locker, are
// subscribed to their Lockers' grant channels on srv.
func waitQueued(t *testing.T, srv *redistest.Server, n int) {
	t.Helper()
	c := srv.Client(t)
	if !waitFor(waitBound, func() bool {
		channels, err := c.PubSubChannels(t.Context(), "*").Result()
		return err == nil && len(channels) >= n
	}) {
		t.Fatalf("%d waiters did not subscribe within %v", n, waitBound)
	}
}

// TestWaiterAfterKeyDeleted: the lock's key is deleted by hand, with its
// queue, and no release tells the waiters: once a key set by hand without an
// expiry (whose ttl never runs out), once a holder's key with a long ttl (as
// a failover to a replica that missed both would leave it). A waiter must
// find the lock free within about a second, whether its Locker queues or
// not.
func TestWaiterAfterKeyDeleted(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				clients := map[string]redis.UniversalClient{"queueing": b.Client, "wake-only": redistest.WakeOnly{Client: b.Client}}
				holder := k.open(t, b.Client, lockConfig{})
				for _, key := range []string{"without-expiry", "of-a-holder"} {
					for _, mode := range []string{"queueing", "wake-only"} {
						name := key + "-" + mode
						if key == "of-a-holder" {
							if _, err := holder.try(t.Context(), name, holderTTL); err != nil {
								t.Fatal(err)
							}
						} else if err := b.Client.Set(t.Context(), lockKey(name), "someone", 0).Err(); err != nil {
							t.Fatal(err)
						}
						count := redistest.Count(b.Client)
						l := k.open(t, clients[mode], lockConfig{})
						ctx, cancel := context.WithTimeout(t.Context(), waitBound)
						got := make(chan error, 1)
						go func() {
							g, err := l.obtain(ctx, name, time.Minute)
							if err == nil {
								err = g.release(ctx)
							}
							got <- err
						}()
						count.AwaitTotal(t, 2) // the probe and the subscribed try found the key
						b.Client.Del(t.Context(), lockKey(name), lockKey(name)+":queue")
						if err := <-got; err != nil {
							t.Errorf("%s: %v: want the lock within about a second of the key's deletion", name, err)
						}
						cancel()
					}
				}
			})
		})
	}
}
