package processes_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestOrderAfterARestart measures what a restart of the lock server does to
// the waiters' arrival order: three waiter processes queue in turn, the
// server restarts, and the holder releases. With AOF (appendfsync always)
// the queue survives, and the waiters are served in arrival order. Without
// persistence the lock and its queue are gone: each waiter, asking again,
// finds the lock or queues anew, and the order they are served in is logged
// for docs/waiting.md. Every waiter must be served either way.
func TestOrderAfterARestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"aof", []string{"--appendonly", "yes", "--appendfsync", "always"}},
		{"no-persistence", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, tc.args...)
			orders, inversions := restartRounds(t, s, tc.args != nil)
			t.Logf("%s: served after a restart, by arrival (0 first): %v; %d inversions in %d rounds", tc.name, orders, inversions, len(orders))
			if tc.name == "aof" && inversions != 0 {
				t.Fatalf("with AOF the queue survives the restart: got %d inversions, want none", inversions)
			}
		})
	}
}

// restartRounds runs five rounds of three waiters queued in turn behind a
// holder, a restart of s (which keeps its data, or not), and the holder's
// release, and returns the order each round's waiters were served in and
// the inversions of arrival order.
func restartRounds(t *testing.T, s *redistest.Server, keeps bool) (orders []string, inversions int) {
	admin := s.Client(t)
	const name = "restart-order"
	queue := lockKey(name) + ":queue"
	for round := range 5 {
		ctx := t.Context()
		holder := newLocker("efficiency", admin, &ownerLog{})
		lease, err := holder.Acquire(ctx, name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 3)
		exited := make(chan struct{}, 3)
		for i := range 3 {
			c := proc.Start(t, "waiter", fmt.Sprintf("LEASEKIT_WAITER=%s efficiency %s 2s", s.Addr, name))
			awaitQueue(t, admin, queue, int64(i+1))
			go func() {
				defer func() { exited <- struct{}{} }()
				got := <-c.Lines()
				if !strings.HasPrefix(got, "acquired ") {
					done <- "failed: " + got
					return
				}
				done <- fmt.Sprint(i)
				c.Send("release")
				_ = c.Wait()
			}()
		}
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
		// With the queue kept, the release must find its waiters subscribed
		// again (their entries name their channels), or it would skip them.
		for _, e := range admin.ZRange(ctx, queue, 0, -1).Val() {
			if !keeps {
				break
			}
			f := strings.Fields(e)
			channel := f[len(f)-1]
			await(t, "a subscriber on "+channel, func() bool { return admin.PubSubNumSub(ctx, channel).Val()[channel] == 1 })
		}
		_ = lease.Release(ctx)
		holder.Close()
		var order []string
		for range 3 {
			select {
			case w := <-done:
				order = append(order, w)
			case <-time.After(time.Minute):
				t.Fatalf("round %d: served %v, want all three waiters served", round, order)
			}
		}
		for range 3 {
			<-exited
		}
		for i := range order {
			for j := i + 1; j < len(order); j++ {
				if order[i] > order[j] {
					inversions++
				}
			}
		}
		orders = append(orders, strings.Join(order, ""))
	}
	return orders, inversions
}
