package scripts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// The semaphore's keys, as semaphore.lua names them.
var semKeys = []string{"sem", "sem:queue"}

// semaphore runs a semaphore's scripts on one backend, with grant channels
// sharded or not.
type semaphore struct {
	t       *testing.T
	b       *redistest.Backend
	sharded string
}

func newSemaphore(t *testing.T, b *redistest.Backend) *semaphore {
	return &semaphore{t: t, b: b, sharded: "0"}
}

// try runs sem_acquire for owner with limit and returns its reply.
func (s *semaphore) try(owner, limit string) []any {
	s.t.Helper()
	reply, err := redistest.Script(scripts.SemAcquire).Run(s.t.Context(), s.b.Client, semKeys, owner, 60000, limit, s.sharded).Result()
	if err != nil {
		s.t.Fatalf("sem_acquire by %s: %v", owner, err)
	}
	return table(s.t, reply)
}

// wait runs sem_wait for owner with limit, the entry to queue and the
// previous one's place and text.
func (s *semaphore) wait(owner, limit, queue, place, prev string) []any {
	s.t.Helper()
	reply, err := redistest.Script(scripts.SemWait).Run(s.t.Context(), s.b.Client, semKeys, owner, 60000, limit, queue, place, prev, s.sharded).Result()
	if err != nil {
		s.t.Fatalf("sem_wait by %s: %v", owner, err)
	}
	return table(s.t, reply)
}

// release runs sem_release for owner, taking leaving out of the queue first.
func (s *semaphore) release(owner, leaving string) int64 {
	s.t.Helper()
	n, err := endCode(redistest.Script(scripts.SemRelease).Run(s.t.Context(), s.b.Client, semKeys, owner, "0", leaving, s.sharded))
	if err != nil {
		s.t.Fatalf("sem_release by %s: %v", owner, err)
	}
	return n
}

// permits returns the owners holding a permit, by expiry: the permits
// set's members scored at or above 0 (the header is scored below).
func (s *semaphore) permits() []string {
	s.t.Helper()
	return s.b.Client.ZRangeArgs(s.t.Context(), redis.ZRangeArgs{Key: "sem", ByScore: true, Start: "0", Stop: "+inf"}).Val()
}

// granted checks that reply grants owner a permit, with code.
func granted(t *testing.T, reply []any, code int64, owner string) {
	t.Helper()
	if len(reply) != 2 || reply[0] != code || reply[1] != owner {
		t.Fatalf("got %v, want [%d %s]", reply, code, owner)
	}
}

// refused checks that a sem_acquire reply refuses a permit.
func refused(t *testing.T, reply []any) {
	t.Helper()
	if len(reply) != 4 || reply[0] != int64(0) || reply[1] != int64(0) || reply[2] != "" {
		t.Fatalf("got %v, want [0 0 '' '']", reply)
	}
}

// expirePermit makes owner's permit expire now on the server, as its ttl
// running out would: a test on a loaded machine cannot rely on a short ttl
// lasting until it is meant to end.
func expirePermit(t *testing.T, b *redistest.Backend, owner string) {
	t.Helper()
	if err := b.Client.ZAddXX(t.Context(), "sem", redis.Z{Score: 1, Member: owner}).Err(); err != nil {
		t.Fatal(err)
	}
}

// limitOf is the header's limit, with its mark, if any, once it is checked
// to be the one member of the permits set scored below 0, with an expiry
// no earlier than the last permit's.
func limitOf(t *testing.T, b *redistest.Backend) string {
	t.Helper()
	h := b.Client.ZRangeWithScores(t.Context(), "sem", 0, -1).Val()
	if len(h) < 2 || h[0].Score >= 0 || h[1].Score < 0 {
		t.Fatalf("permits set %v: want the header first, scored below 0, then the permits", h)
	}
	if last := h[len(h)-1].Score; -h[0].Score < last {
		t.Fatalf("header %v expires before the last permit (%.0f)", h[0], last)
	}
	member, _ := h[0].Member.(string)
	limit, ok := strings.CutPrefix(member, "#")
	if !ok {
		t.Fatalf("header %q: want # and the limit", member)
	}
	return limit
}

// full checks that a sem_wait reply of a waiter that does not queue refuses
// a permit, and returns the ms until the first permit expires.
func full(t *testing.T, reply []any) int64 {
	t.Helper()
	ttl, _ := reply[1].(int64)
	if len(reply) != 4 || reply[0] != int64(0) || reply[2] != "" || ttl <= 0 || ttl > 60000 {
		t.Fatalf("got %v, want [0 ttl '' ''] with ttl within (0, 60000]", reply)
	}
	return ttl
}

// TestSemaphoreLimit: up to limit owners hold a permit at once; the next
// is refused with the time until the first permit expires; an owner that
// asks again gets its own permit back, restarted; a release frees a place.
func TestSemaphoreLimit(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		s := newSemaphore(t, b)
		granted(t, s.try("a", "2"), 1, "a")
		b.Pass(10 * time.Millisecond)
		granted(t, s.try("b", "2"), 1, "b")
		if got := limitOf(t, b); got != "2" {
			t.Fatalf("limit: got %q, want 2", got)
		}
		refused(t, s.try("c", "2"))
		if ttl := full(t, s.wait("c", "2", "", "", "")); ttl >= 60000 {
			t.Fatalf("refused: first permit expires in %d ms, want less than a's full minute", ttl)
		}
		b.Pass(10 * time.Millisecond)
		granted(t, s.try("a", "2"), 2, "a") // a retry: restarted, not a second permit
		if got := s.permits(); strings.Join(got, ",") != "b,a" {
			t.Fatalf("permits by expiry: got %v, want b (the older), then a (restarted)", got)
		}
		// They outlive the last permit by a ttl, so that not every grant
		// has to keep them alive.
		if ttl := b.Client.PTTL(t.Context(), "sem").Val(); ttl <= time.Minute || ttl > 2*time.Minute {
			t.Fatalf("permits ttl: got %v, want within (1m, 2m]", ttl)
		}
		if n := s.release("a", ""); n != 1 {
			t.Fatalf("release by a: got %d, want 1", n)
		}
		if n := s.release("a", ""); n != 0 {
			t.Fatalf("a second release by a: got %d, want 0 (no permit)", n)
		}
		granted(t, s.try("c", "2"), 1, "c")
		s.release("b", "")
		s.release("c", "")
		if n := b.Client.Exists(t.Context(), "sem").Val(); n != 0 {
			t.Fatalf("after the last release the permits are left")
		}
	})
}

// TestSemaphoreLimitConflict: while permits are live, an acquire with
// another limit is refused with the limit in use; once none is live, the
// next acquire sets its own.
func TestSemaphoreLimitConflict(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newSemaphore(t, b)
		granted(t, s.try("a", "2"), 1, "a")
		for _, run := range []func() error{
			func() error {
				return redistest.Script(scripts.SemAcquire).Run(ctx, b.Client, semKeys, "b", 60000, "3", "0").Err()
			},
			func() error {
				return redistest.Script(scripts.SemWait).Run(ctx, b.Client, semKeys, "b", 60000, "3", entryOf("b", "e", 0, 0, "chan"), "", "", "0").Err()
			},
		} {
			if err := run(); err == nil || err.Error() != "LIMIT 2" {
				t.Fatalf("limit 3 while permits of limit 2 are live: got %v, want the error LIMIT 2", err)
			}
		}
		if n := b.Client.ZCard(ctx, "sem:queue").Val(); n != 0 {
			t.Fatalf("the refused waiter left %d entries in the queue", n)
		}
		s.release("a", "")
		if err := redistest.Script(scripts.SemAcquire).Run(ctx, b.Client, semKeys, "b", 50, "3", "0").Err(); err != nil {
			t.Fatalf("limit 3 once no permit is live: %v", err)
		}
		if got := limitOf(t, b); got != "3" {
			t.Fatalf("limit after the semaphore emptied: got %q, want 3", got)
		}
		// An expired permit does not hold the limit either.
		b.Pass(60 * time.Millisecond)
		granted(t, s.try("c", "1"), 1, "c")
	})
}

// TestSemaphoreExpiry: a permit whose holder never releases it frees its
// place at its ttl: the next script drops it.
func TestSemaphoreExpiry(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		if err := redistest.Script(scripts.SemAcquire).Run(ctx, b.Client, semKeys, "short", 60000, "1", "0").Err(); err != nil {
			t.Fatal(err)
		}
		refused(t, newSemaphore(t, b).try("next", "1"))
		if ms, err := redistest.Script(scripts.SemPTTL).Run(ctx, b.Client, semKeys, "short").Int64(); err != nil || ms <= 0 || ms > 60000 {
			t.Fatalf("sem_pttl: got %d, %v, want within (0, 60000]", ms, err)
		}
		expirePermit(t, b, "short")
		if ms, err := redistest.Script(scripts.SemPTTL).Run(ctx, b.Client, semKeys, "short").Int64(); err != nil || ms != -2 {
			t.Fatalf("sem_pttl after the ttl: got %d, %v, want -2", ms, err)
		}
		if n, err := redistest.Script(scripts.SemRefresh).Run(ctx, b.Client, semKeys, "short", 60000).Int64(); err != nil || n != 0 {
			t.Fatalf("sem_refresh after the ttl: got %d, %v, want 0", n, err)
		}
		granted(t, newSemaphore(t, b).try("next", "1"), 1, "next")
		if n, err := redistest.Script(scripts.SemRefresh).Run(ctx, b.Client, semKeys, "next", 120000).Int64(); err != nil || n != 1 {
			t.Fatalf("sem_refresh: got %d, %v, want 1", n, err)
		}
		if ms, _ := redistest.Script(scripts.SemPTTL).Run(ctx, b.Client, semKeys, "next").Int64(); ms <= 60000 {
			t.Fatalf("sem_pttl after a refresh to 120 s: got %d", ms)
		}
		limitOf(t, b) // the header's expiry is at least the refreshed permit's
	})
}

// TestSemaphoreHandoff: waiters queue in arrival order; a release hands
// its permit to the first that still listens (skipping one whose channel
// has no subscriber) and announces it; a permit that expired goes to the
// next waiter at its own attempt. With sharded channels on redis-server
// only (miniredis has no SPUBLISH).
func TestSemaphoreHandoff(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, b *redistest.Backend) { testSemaphoreHandoff(t, newSemaphore(t, b)) })
	})
	t.Run("sharded", func(t *testing.T) {
		s := newSemaphore(t, redistest.Real(t))
		s.sharded = "1"
		testSemaphoreHandoff(t, s)
	})
}

func testSemaphoreHandoff(t *testing.T, s *semaphore) {
	ctx, b := t.Context(), s.b
	if err := redistest.Script(scripts.SemAcquire).Run(ctx, b.Client, semKeys, "short", 60000, "2", s.sharded).Err(); err != nil {
		t.Fatal(err)
	}
	granted(t, s.try("long", "2"), 1, "long")
	var listen *redis.PubSub
	if s.sharded == "1" {
		listen = b.Client.SSubscribe(ctx, "chan-a", "chan-b", "chan-c")
	} else {
		listen = b.Client.Subscribe(ctx, "chan-a", "chan-b", "chan-c")
	}
	defer listen.Close()
	for range 3 {
		if _, err := listen.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(owner string) string { return entryOf(owner, "e", 0, 0, "chan-"+owner) }
	places := map[string]string{}
	for _, owner := range []string{"dead", "a", "b", "c"} {
		places[owner] = queued(t, s.wait(owner, "2", entry(owner), "", ""), 3)
		b.Pass(time.Millisecond) // distinct places on a fast clock
	}
	before := serverMicros(t, b.Client)
	if n := s.release("long", ""); n != 2 {
		t.Fatalf("release: got %d, want 2, handed over", n)
	}
	expectPermit(t, listen, "chan-a", "id-a.0", "-", "2", before, serverMicros(t, b.Client))
	if got := strings.Join(s.permits(), ","); got != "short,a" {
		t.Fatalf("permits: got %s, want short and a (the dead waiter skipped)", got)
	}
	// short's permit expires: a's release hands its own to b, and c finds
	// the expired one free at its next attempt.
	expirePermit(t, b, "short")
	before = serverMicros(t, b.Client)
	if n := s.release("a", ""); n != 2 {
		t.Fatalf("release: got %d, want 2, handed over", n)
	}
	expectPermit(t, listen, "chan-b", "id-b.0", "-", "2", before, serverMicros(t, b.Client))
	granted(t, s.wait("c", "2", entryOf("c", "e", 0, 1, "chan-c"), places["c"], entry("c")), 1, "c")
	if got := strings.Join(s.permits(), ","); got != "b,c" {
		t.Fatalf("permits: got %s, want b and c", got)
	}
	if n := b.Client.ZCard(ctx, "sem:queue").Val(); n != 0 {
		t.Fatalf("queue: %d entries left, want none", n)
	}
}

// TestSemaphoreServesTheQueueFirst: a permit freed without a release (its
// holder died) goes to the first queued waiter, whoever finds it: a waiter
// further back keeps its place, and a newcomer's try is refused.
func TestSemaphoreServesTheQueueFirst(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newSemaphore(t, b)
		if err := redistest.Script(scripts.SemAcquire).Run(ctx, b.Client, semKeys, "dies", 60000, "1", "0").Err(); err != nil {
			t.Fatal(err)
		}
		listen := subscribe(t, b.Client, "chan")
		first, second := entryOf("first", "e", 0, 0, "chan"), entryOf("second", "e", 0, 0, "chan")
		queued(t, s.wait("first", "1", first, "", ""), 3)
		b.Pass(time.Millisecond)
		place := queued(t, s.wait("second", "1", second, "", ""), 3)
		expirePermit(t, b, "dies")
		before := serverMicros(t, b.Client)
		// second asks first: first is served, second stays queued.
		if got := queued(t, s.wait("second", "1", entryOf("second", "e", 0, 1, "chan"), place, second), 0); got != place {
			t.Fatalf("second's place: got %s, want %s", got, place)
		}
		expectPermit(t, listen, "chan", "id-first.0", "-", "1", before, serverMicros(t, b.Client))
		if got := strings.Join(s.permits(), ","); got != "first" {
			t.Fatalf("permits: got %s, want first's", got)
		}
		refused(t, s.try("newcomer", "1"))
		// first's own attempt finds its permit.
		granted(t, s.wait("first", "1", entryOf("first", "e", 0, 1, "chan"), "1", first), 2, "first")
		// Released, it goes to second; a newcomer is still refused.
		if n := s.release("first", ""); n != 2 {
			t.Fatalf("release: got %d, want 2", n)
		}
		refused(t, s.try("newcomer", "1"))
		granted(t, s.wait("second", "1", entryOf("second", "e", 0, 1, "chan"), place, second), 2, "second")
	})
}

// TestSemaphoreWaiterTakesItsTurn: a waiter whose own entry is first when
// a permit is free takes it in its own attempt, and its entries leave the
// queue; one that does not queue takes a permit only after the queue.
func TestSemaphoreWaiterTakesItsTurn(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newSemaphore(t, b)
		subscribe(t, b.Client, "chan")
		granted(t, s.try("holder", "1"), 1, "holder")
		e0, e1 := entryOf("w", "e", 0, 0, "chan"), entryOf("w", "e", 0, 1, "chan")
		place := queued(t, s.wait("w", "1", e0, "", ""), 3)
		full(t, s.wait("plain", "1", "", "", ""))
		// The holder's permit is deleted by hand: no release, no handoff.
		b.Client.ZRem(ctx, "sem", "holder")
		granted(t, s.wait("w", "1", e1, place, e0), 1, "w")
		if n := b.Client.ZCard(ctx, "sem:queue").Val(); n != 0 {
			t.Fatalf("queue: %d entries, want w's gone", n)
		}
		full(t, s.wait("plain", "1", "", "", ""))
		s.release("w", "")
		granted(t, s.wait("plain", "1", "", "", ""), 1, "plain")
	})
}

// TestSemaphoreWakesWaitersThatDoNotQueue: a waiter that does not queue
// marks the semaphore, and a release that hands no permit over then
// publishes a wake-up; an unmarked semaphore's release publishes nothing.
func TestSemaphoreWakesWaitersThatDoNotQueue(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newSemaphore(t, b)
		wake := subscribe(t, b.Client, "sem:wake")
		granted(t, s.try("a", "1"), 1, "a")
		s.release("a", "")
		// Had the unmarked release published, its message would come first.
		b.Client.Publish(ctx, "sem:wake", "after the unmarked release")
		if msg, err := wake.ReceiveMessage(ctx); err != nil || msg.Payload != "after the unmarked release" {
			t.Fatalf("after an unmarked release: got %v, %v, want no wake-up", msg, err)
		}
		granted(t, s.try("a", "1"), 1, "a")
		full(t, s.wait("plain", "1", "", "", ""))
		if got := limitOf(t, b); got != "1*" {
			t.Fatalf("limit after a waiter that does not queue: got %q, want 1*", got)
		}
		granted(t, s.try("a", "1"), 2, "a") // the mark does not change the limit
		s.release("a", "")
		msg, err := wake.ReceiveMessage(ctx)
		if err != nil || msg.Channel != "sem:wake" || msg.Payload != "" {
			t.Fatalf("after the release: got %v, %v, want one empty message on sem:wake", msg, err)
		}
		granted(t, s.wait("plain", "1", "", "", ""), 1, "plain")
	})
}

// TestSemaphoreIsIdempotent: an acquire sent again after a lost reply gets
// the same permit back, and a wait sent again finds its entry queued.
func TestSemaphoreIsIdempotent(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		s := newSemaphore(t, b)
		granted(t, s.try("a", "1"), 1, "a")
		granted(t, s.try("a", "1"), 2, "a")
		e := entryOf("w", "e", 0, 0, "chan")
		first := queued(t, s.wait("w", "1", e, "", ""), 3)
		if again := queued(t, s.wait("w", "1", e, "", ""), 3); again != first {
			t.Fatalf("the same wait sent again: place %s, want %s", again, first)
		}
		if n := b.Client.ZCard(t.Context(), "sem:queue").Val(); n != 1 {
			t.Fatalf("queue: %d entries, want 1", n)
		}
		if n := len(s.permits()); n != 1 {
			t.Fatalf("permits: %d, want 1", n)
		}
	})
}

// TestSemaphoreIsOneKey: the limit lives with the permits, in one key, so
// no permit can outlive it: deleting the key leaves no permit, and the next
// acquire sets its own limit. A refresh of a short permit does not cut the
// key short of a longer one, and a waiter that does not queue marks the
// header, which expires with the last permit.
func TestSemaphoreIsOneKey(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newSemaphore(t, b)
		if err := redistest.Script(scripts.SemAcquire).Run(ctx, b.Client, semKeys, "long", 3600000, "2", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Script(scripts.SemAcquire).Run(ctx, b.Client, semKeys, "short", 1000, "2", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if keys := b.Client.Keys(ctx, "sem*").Val(); len(keys) != 1 || keys[0] != "sem" {
			t.Fatalf("keys: got %v, want the permits key alone", keys)
		}
		if n, err := redistest.Script(scripts.SemRefresh).Run(ctx, b.Client, semKeys, "short", 1000).Int64(); err != nil || n != 1 {
			t.Fatalf("refresh of the short permit: got %d, %v, want 1", n, err)
		}
		if ttl := b.Client.PTTL(ctx, "sem").Val(); ttl < 50*time.Minute {
			t.Fatalf("the permits key expires in %v, before the hour-long permit", ttl)
		}
		full(t, s.wait("plain", "2", "", "", ""))
		if got := limitOf(t, b); got != "2*" {
			t.Fatalf("limit after a waiter that does not queue: got %q, want 2*", got)
		}
		b.Client.Del(ctx, "sem")
		granted(t, s.try("other", "3"), 1, "other")
		if got := limitOf(t, b); got != "3" {
			t.Fatalf("limit after the key was deleted and a limit-3 acquire: got %q, want 3", got)
		}
	})
}

// TestSemaphoreHandoffKeepsAnExpiry: a release of the only permit that hands
// it to a waiter empties the permits key and fills it again: the key keeps
// an expiry, so that an abandoned semaphore leaves nothing behind.
func TestSemaphoreHandoffKeepsAnExpiry(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newSemaphore(t, b)
		granted(t, s.try("a", "1"), 1, "a")
		listen := subscribe(t, b.Client, "chan-w")
		queued(t, s.wait("w", "1", entryOf("w", "e", 0, 0, "chan-w"), "", ""), 3)
		if n := s.release("a", ""); n != 2 {
			t.Fatalf("release: got %d, want 2, handed over", n)
		}
		if _, err := listen.ReceiveMessage(ctx); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.permits(), ","); got != "w" {
			t.Fatalf("permits: got %s, want w's", got)
		}
		if ttl := b.Client.PTTL(ctx, "sem").Val(); ttl <= 0 {
			t.Fatalf("the permits key after the handoff: ttl %v, want an expiry", ttl)
		}
	})
}
