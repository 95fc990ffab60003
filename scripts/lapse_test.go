package scripts_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// The rules these tests hold the scripts to are the day a holder dies:
// a lease that lapsed with waiters queued goes to the first live waiter,
// as a release would hand it; no call looks at more than a hundred
// queue entries. The value with its mark is specified in
// scripts/wire.go.

// lapse makes the lease stored in the lock as value (with the mark of
// waiters) lapse now, as when its holder was killed: the key stays for the
// ten seconds a marked key outlives its lease.
func lapse(t *testing.T, b *redistest.Backend, value string) {
	t.Helper()
	past := serverMicros(t, b.Client)/1000 - 1
	b.Client.Set(t.Context(), "lock", value+"*"+strconv.FormatInt(past, 10), 10*time.Second)
}

// TestLapsedLeaseGoesToTheFirstLiveWaiter: with waiters queued (a, then b
// whose process is gone, then c), the holder's lease lapses. The key stays,
// so a newcomer's SET NX cannot take the lock; the holder's refresh, ttl
// and release find it gone; and the first attempt of any waiter (here c's,
// whose timer fired first) hands the lock to a, the first live waiter, and
// keeps c queued: the order a release would have kept.
func TestLapsedLeaseGoesToTheFirstLiveWaiter(t *testing.T) {
	for _, kind := range []string{"e", "f"} {
		t.Run(kind, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				b.Client.Set(ctx, "lock:fence", "32", 0)
				holder, want, token := "holder", "a", "-"
				if kind == "f" {
					holder, want, token = "holder:32", "a:33", "33"
				}
				b.Client.Set(ctx, "lock", holder, time.Minute)
				listen := subscribe(t, b.Client, "chan-a")
				subscribe(t, b.Client, "chan-c")
				places := map[string]string{}
				for _, w := range []string{"a", "b", "c"} {
					places[w] = queued(t, waitReply(t, b, w, kind, entryOf(w, kind, 0, 0, "chan-"+w), "", ""), 3)
				}
				lapse(t, b, holder)

				if ok := b.Client.SetNX(ctx, "lock", "newcomer", time.Minute).Val(); ok {
					t.Fatalf("a newcomer's SET NX took the lock whose lease lapsed with waiters queued")
				}
				if n, err := redistest.Script(scripts.Refresh).Run(ctx, b.Client, []string{"lock"}, holder, 60000).Int64(); err != nil || n != 0 {
					t.Fatalf("the holder's refresh after its lease lapsed: got %d, %v, want 0 (gone)", n, err)
				}
				if n, err := redistest.Script(scripts.PTTL).Run(ctx, b.Client, []string{"lock"}, holder).Int64(); err != nil || n != -2 {
					t.Fatalf("the holder's ttl after its lease lapsed: got %d, %v, want -2 (gone)", n, err)
				}

				before := serverMicros(t, b.Client)
				reply := waitReply(t, b, "c", kind, entryOf("c", kind, 0, 1, "chan-c"), places["c"], entryOf("c", kind, 0, 0, "chan-c"))
				if queued(t, reply, 0) != places["c"] || len(reply) != 5 || reply[4] != token {
					t.Fatalf("c's attempt: got %v, want c kept at its place %s, and the token %s it handed to a", reply, places["c"], token)
				}
				expectGrant(t, listen, "chan-a", "id-a.0", token, before, serverMicros(t, b.Client))
				if v := lockValue(t, b); v != want+"*" {
					t.Fatalf("after c's attempt the lock holds %q, want a's grant %q", v, want+"*")
				}
				if got := b.Client.ZRange(ctx, "lock:queue", 0, -1).Val(); len(got) != 2 || got[1] != entryOf("c", kind, 0, 0, "chan-c") {
					t.Fatalf("queue after the lapse was served: %q, want b's dead entry (for the next release to drop) and c", got)
				}
			})
		})
	}
}

// TestLapsedLeaseWithoutLiveWaiters: when nobody queued is alive any more,
// whoever finds the lease lapsed takes the lock: a waiter that does not
// queue, and a lone acquire (which the wait script serves: a fenced acquire
// replies 0 to say so).
func TestLapsedLeaseWithoutLiveWaiters(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.Set(ctx, "lock:fence", "7", 0)
		b.Client.ZAdd(ctx, "lock:queue", redis.Z{Score: 1, Member: entryOf("dead", "f", 0, 0, "nobody")})
		lapse(t, b, "holder:7")
		if n, err := fencedInt(redistest.Script(scripts.FencedAcquire).Run(ctx, b.Client, lockKeys, "lone", 60000, "f")); err != nil || n != 0 {
			t.Fatalf("fenced acquire of a lapsed lease: got %d, %v, want 0 (serve the queue first)", n, err)
		}
		if got := waitReply(t, b, "lone", "f", "", "", ""); got[0] != int64(1) || got[1] != "lone:8" {
			t.Fatalf("wait without an entry on a lapsed lease, nobody alive queued: got %v, want [1 lone:8]", got)
		}
		if n := b.Client.Exists(ctx, "lock:queue").Val(); n != 0 {
			t.Fatalf("the dead entry is still queued")
		}
	})
}

// deadEntries queues n entries of waiters whose process is gone (nobody
// listens on their channel) at places 1..n, and one of a live waiter behind
// them, on chan-live.
func deadEntries(t *testing.T, b *redistest.Backend, key, kind string, n int) *redis.PubSub {
	t.Helper()
	z := make([]redis.Z, 0, n+1)
	for i := range n {
		z = append(z, redis.Z{Score: float64(i + 1), Member: entryOf("dead"+strconv.Itoa(i), kind, 0, 0, "gone")})
	}
	z = append(z, redis.Z{Score: float64(n + 1), Member: entryOf("live", kind, 0, 0, "chan-live")})
	if err := b.Client.ZAdd(t.Context(), key, z...).Err(); err != nil {
		t.Fatal(err)
	}
	return subscribe(t, b.Client, "chan-live")
}

// TestDeadEntriesAreServedInShortCalls: a release behind 1,000 dead entries
// looks at a hundred, leaves the lock vacant (no SET NX can take it)
// and says so; calls with the empty value go on, and the last hands the
// lock to the live waiter. A waiter's attempt on the vacant lock says to
// attempt again.
func TestDeadEntriesAreServedInShortCalls(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.Set(ctx, "lock", "holder*", time.Minute)
		listen := deadEntries(t, b, "lock:queue", "e", 1000)
		release := func(value string) any {
			t.Helper()
			reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, lockKeys, value, "0", "", "0"))
			if err != nil {
				t.Fatalf("release of %q: %v", value, err)
			}
			return reply
		}
		if got := release("holder"); got != int64(3) {
			t.Fatalf("release behind 1000 dead entries: got %v, want 3 (released, go on)", got)
		}
		if v := b.Client.Get(ctx, "lock").Val(); v != "*0" {
			t.Fatalf("after the first call the lock holds %q, want the vacant value", v)
		}
		if b.Client.SetNX(ctx, "lock", "newcomer", time.Minute).Val() {
			t.Fatalf("a newcomer's SET NX took the vacant lock ahead of the queue")
		}
		if got := waitReply(t, b, "other", "e", "", "", ""); got[0] != int64(4) {
			t.Fatalf("a waiter's attempt on the vacant lock: got %v, want code 4 (attempt again)", got)
		}
		calls := 0
		before := serverMicros(t, b.Client)
		for reply := any(int64(-2)); reply == int64(-2); calls++ {
			if calls > 20 {
				t.Fatalf("still serving after %d calls", calls)
			}
			reply = release("")
			if done, _ := reply.([]any); len(done) == 2 && done[0] == int64(0) && done[1] == "-" {
				break // gone (the vacant value), and handed on
			} else if reply != int64(-2) {
				t.Fatalf("a call going on: got %v, want -2 (go on) or [0 -] (handed on)", reply)
			}
		}
		if calls < 2 {
			t.Fatalf("served 1000 dead entries in %d calls, want each call to look at a hundred at most", calls)
		}
		expectGrant(t, listen, "chan-live", "id-live.0", "-", before, serverMicros(t, b.Client))
		if v := lockValue(t, b); v != "live*" {
			t.Fatalf("the lock holds %q, want the live waiter's grant", v)
		}
	})
}

// TestSemaphoreDeadEntriesAreServedInShortCalls: the same for a
// semaphore's release: it says to go on, and the calls with the empty owner
// hand the freed permit to the live waiter.
func TestSemaphoreDeadEntriesAreServedInShortCalls(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		s := newSemaphore(t, b)
		granted(t, s.try("holder", "1"), 1, "holder")
		listen := deadEntries(t, b, "sem:queue", "e", 1000)
		if n := s.release("holder", ""); n != 3 {
			t.Fatalf("release behind 1000 dead entries: got %d, want 3 (released, go on)", n)
		}
		if got := s.try("newcomer", "1"); len(got) != 4 || got[0] != int64(4) {
			t.Fatalf("a newcomer's try while dead entries are ahead: got %v, want code 4 (attempt again)", got)
		}
		calls := 1
		for n := int64(3); n == 3; calls++ {
			if calls > 20 {
				t.Fatalf("still serving after %d calls", calls)
			}
			n = s.release("", "")
		}
		if calls < 3 {
			t.Fatalf("served 1000 dead entries in %d calls, want each to look at a hundred at most", calls)
		}
		msg, err := listen.ReceiveMessage(t.Context())
		if err != nil || msg.Channel != "chan-live" {
			t.Fatalf("grant message: got %v, %v, want one on chan-live", msg, err)
		}
		if got := s.permits(); len(got) != 1 || got[0] != "live" {
			t.Fatalf("permits: got %v, want the live waiter's", got)
		}
	})
}

// TestRefreshKeepsTheLeaderKey: a leader's refresh keeps the election's
// leader key alive with its lease, and says when the key no longer holds
// its grant (deleted or evicted), so that the leader writes it back.
func TestRefreshKeepsTheLeaderKey(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		keys := []string{"lock", "lock:fence", "lock:leader"}
		b.Client.Set(ctx, "lock", "owner-a:5", time.Minute)
		b.Client.HSet(ctx, "lock:leader", "grant", "owner-a:5", "value", "v")
		b.Client.PExpire(ctx, "lock:leader", time.Second)
		if n, err := redistest.Script(scripts.Refresh).Run(ctx, b.Client, keys, "owner-a:5", 60000, "").Int64(); err != nil || n != 1 {
			t.Fatalf("refresh: got %d, %v, want 1", n, err)
		}
		if ttl := b.Client.PTTL(ctx, "lock:leader").Val(); ttl < 59*time.Second {
			t.Fatalf("leader key ttl after the refresh: %v, want the lease's minute", ttl)
		}
		b.Client.Del(ctx, "lock:leader")
		if n, err := redistest.Script(scripts.Refresh).Run(ctx, b.Client, keys, "owner-a:5", 60000, "").Int64(); err != nil || n != 2 {
			t.Fatalf("refresh with the leader key deleted: got %d, %v, want 2 (write it back)", n, err)
		}
		if ttl := b.Client.PTTL(ctx, "lock").Val(); ttl < 59*time.Second {
			t.Fatalf("the lease was not refreshed: %v left", ttl)
		}
	})
}
