package scripts_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// The wire format these tests write by hand is specified in
// scripts/wire.go.

var lockKeys = []string{"lock", "lock:queue", "lock:fence"}

// entryOf is the queue entry of owner, with ttl 60 s, of kind, with
// patience ms (0, as leasekit writes it; no release judges it), generation
// gen, heard on channel.
func entryOf(owner, kind string, patience, gen int, channel string) string {
	return owner + " 60000 " + kind + " " + strconv.Itoa(patience) + " id-" + owner + "." + strconv.Itoa(gen) + " " + channel
}

// waitReply runs the wait script for owner with the entry to queue and the
// previous entry's place and text, and returns its reply.
func waitReply(t *testing.T, b *redistest.Backend, owner, kind, queue, place, prev string) []any {
	t.Helper()
	reply, err := redistest.Script(scripts.Wait).Run(t.Context(), b.Client, lockKeys, owner, 60000, kind, queue, place, prev).Result()
	if err != nil {
		t.Fatalf("wait by %s: %v", owner, err)
	}
	return table(t, reply)
}

// lockValue is the lock's value with the expiry its mark of waiters
// records taken out ("owner*" for "owner*1795974129470"), once checked
// against the server's clock: a lease of at most a minute, and a key that
// outlives it by ten seconds.
func lockValue(t *testing.T, b *redistest.Backend) string {
	t.Helper()
	v := b.Client.Get(t.Context(), "lock").Val()
	value, mark, ok := strings.Cut(v, "*")
	if !ok || mark == "" {
		return v
	}
	expiry, err := strconv.ParseInt(mark, 10, 64)
	now := serverMicros(t, b.Client) / 1000
	if err != nil || expiry <= now || expiry > now+60_000 {
		t.Fatalf("the lock holds %q: want a mark with the lease's expiry, within a minute of the server clock %d ms", v, now)
	}
	// 100 ms for the script's own run: Redis 7.0 counts a PX from the
	// command, the lease from the TIME read at the script's start.
	if left, key := expiry-now, b.Client.PTTL(t.Context(), "lock").Val().Milliseconds(); key < left+9_000 || key > left+10_100 {
		t.Fatalf("the lock holds %q with %d ms left on its lease, and its key %d ms: want it to outlive the lease by 10 s", v, left, key)
	}
	return value + "*"
}

// queued checks a wait reply that left the waiter in the queue: code 3 when
// it queued the entry it was given, 0 when it kept the previous one; and
// returns the place.
func queued(t *testing.T, reply []any, code int64) string {
	t.Helper()
	if len(reply) != 4 && len(reply) != 5 {
		t.Fatalf("wait: got %v, want [%d ttl place now]", reply, code)
	}
	place, _ := reply[2].(string)
	now, _ := reply[3].(string)
	if reply[0] != code || place == "" || now == "" {
		t.Fatalf("wait: got %v, want [%d ttl place now]", reply, code)
	}
	if ttl, _ := reply[1].(int64); ttl <= 0 || ttl > 60000 {
		t.Fatalf("wait: holder ttl %v, want within (0, 60000]", reply[1])
	}
	return place
}

// TestHandoff drives the wait queue by hand: waiters queue in arrival order,
// a release hands the lock to the first waiter that still listens (skipping
// one whose channel has no subscriber), tells it which entry and when, and
// deletes the key once nobody is left. With sharded grant channels (Redis
// Cluster's: SHARDNUMSUB and SPUBLISH, which a single Redis 7 server runs
// too, and miniredis does not) on redis-server only.
func TestHandoff(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		name := "efficiency"
		if fenced {
			name = "correctness"
		}
		t.Run(name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				testHandoff(t, b, fenced, false)
			})
		})
		t.Run(name+"/sharded", func(t *testing.T) {
			testHandoff(t, redistest.Real(t), fenced, true)
		})
	}
}

func testHandoff(t *testing.T, b *redistest.Backend, fenced, sharded bool) {
	ctx := t.Context()
	b.Client.Set(ctx, "lock:fence", "32", 0)
	shardedArg, kind, token, handed := "0", "e", "-", any(int64(2))
	if sharded {
		shardedArg = "1"
	}
	if fenced {
		kind, token, handed = "f", "34", "34"
	}
	value := func(owner string, token int) string {
		if fenced {
			return owner + ":" + strconv.Itoa(token)
		}
		return owner
	}
	entry := func(owner string, gen int) string { return entryOf(owner, kind, 0, gen, "chan-"+owner) }
	release := func(v, leaving string) any {
		t.Helper()
		reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, lockKeys, v, "0", leaving, shardedArg))
		if err != nil {
			t.Fatalf("release of %q: %v", v, err)
		}
		return reply
	}

	// A free lock: the waiter takes it at once and is not queued.
	if got := waitReply(t, b, "holder", kind, entry("holder", 0), "", ""); got[0] != int64(1) || got[1] != value("holder", 33) {
		t.Fatalf("wait on a free lock: got %v, want [1 %s]", got, value("holder", 33))
	}
	// The holder's own retry is its grant back, not a queue entry.
	if got := waitReply(t, b, "holder", kind, entry("holder", 0), "", ""); got[0] != int64(2) || got[1] != value("holder", 33) {
		t.Fatalf("the holder waiting again: got %v, want [2 %s], its own grant", got, value("holder", 33))
	}
	if n := b.Client.ZCard(ctx, "lock:queue").Val(); n != 0 {
		t.Fatalf("queue after the holder's grant: %d entries, want none", n)
	}

	listen := b.Client.Subscribe(ctx, "chan-a", "chan-b")
	if sharded {
		_ = listen.Close()
		listen = b.Client.SSubscribe(ctx, "chan-a", "chan-b")
	}
	defer listen.Close()
	wake := b.Client.Subscribe(ctx, "lock:wake")
	defer wake.Close()
	for _, ps := range []*redis.PubSub{listen, listen, wake} {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
	}
	// A pattern subscriber (a monitoring tool, say) hears every channel; it
	// must not make the dead waiter look alive.
	watcher := b.Client.PSubscribe(ctx, "chan-*")
	defer watcher.Close()
	if _, err := watcher.Receive(ctx); err != nil {
		t.Fatalf("psubscribe: %v", err)
	}
	places := map[string]string{}
	for _, owner := range []string{"dead", "a", "b"} {
		places[owner] = queued(t, waitReply(t, b, owner, kind, entry(owner, 0), "", ""), 3)
		time.Sleep(time.Millisecond) // distinct places on a fast clock
	}
	// a again, with its place: its entry is still queued, and stays.
	if got := queued(t, waitReply(t, b, "a", kind, entry("a", 1), places["a"], entry("a", 0)), 0); got != places["a"] {
		t.Fatalf("a waiting again: place %s, want its own %s", got, places["a"])
	}
	if n := b.Client.ZCard(ctx, "lock:queue").Val(); n != 3 {
		t.Fatalf("queue length: got %d, want 3", n)
	}
	if ttl := b.Client.PTTL(ctx, "lock:queue").Val(); ttl <= 60*time.Second {
		t.Fatalf("queue ttl: got %v, want it to outlive the holder's 60s", ttl)
	}

	// Released: "dead" has nobody on its channel and is skipped, without a
	// token spent on it; a gets it.
	before := serverMicros(t, b.Client)
	if got := release(value("holder", 33), ""); got != handed {
		t.Fatalf("release by the holder: got %v (%T), want %v, the handoff", got, got, handed)
	}
	if v := lockValue(t, b); v != value("a", 34)+"*" {
		t.Fatalf("after the release the lock holds %q, want %q (the dead waiter skipped, the grant marked as queued for)", v, value("a", 34)+"*")
	}
	if n, _ := b.Client.Get(ctx, "lock:fence").Int(); fenced != (n == 34) || !fenced && n != 32 {
		t.Fatalf("fence counter: got %d, want 34 for correctness grants, 32 (untouched) for efficiency ones", n)
	}
	if ttl := b.Client.PTTL(ctx, "lock").Val(); ttl <= 59*time.Second {
		t.Fatalf("handed-off lock ttl: got %v, want a's 60s", ttl)
	}
	expectGrant(t, listen, "chan-a", "id-a.0", token, before, serverMicros(t, b.Client))

	// b gives up: its entry goes, and the lock stays a's.
	if got := release(value("b", 0), entry("b", 0)); got != int64(-1) {
		t.Fatalf("b leaving the queue: got %v, want -1 (it holds nothing; a holds the lock)", got)
	}
	if n := b.Client.ZCard(ctx, "lock:queue").Val(); n != 0 {
		t.Fatalf("queue length after b left: got %d, want 0", n)
	}

	// a releases with nobody queued: the key goes and, as it was marked, a
	// wake-up is published for waiters that do not queue.
	if got := release(value("a", 34), ""); got != int64(1) {
		t.Fatalf("release by a: got %v, want 1 (deleted)", got)
	}
	if b.Client.Exists(ctx, "lock").Val() != 0 {
		t.Fatalf("the key survived a release with nobody queued")
	}
	msg, err := wake.ReceiveMessage(ctx)
	if err != nil || msg.Channel != "lock:wake" || msg.Payload != "" {
		t.Fatalf("after the last release: got %v, %v, want an empty message on lock:wake", msg, err)
	}
}

// expectGrant reads the next message and checks it announces a grant with
// token to the entry with ticket, made when the server clock read between
// before and after (µs).
func expectGrant(t *testing.T, ps *redis.PubSub, channel, ticket, token string, before, after int64) {
	t.Helper()
	expectPermit(t, ps, channel, ticket, token, "", before, after)
}

// expectPermit is expectGrant for a semaphore's permit granted under limit
// (a lock's grant: ""), which ends the message.
func expectPermit(t *testing.T, ps *redis.PubSub, channel, ticket, token, limit string, before, after int64) {
	t.Helper()
	msg, err := ps.ReceiveMessage(t.Context())
	if err != nil {
		t.Fatalf("grant message: %v", err)
	}
	fields := strings.Fields(msg.Payload)
	if limit != "" && len(fields) == 5 && fields[4] == limit {
		fields = fields[:4]
	}
	if msg.Channel != channel || len(fields) != 4 || fields[0] != ticket || fields[1] != token {
		t.Fatalf("grant message: got %q on %s, want %q, %q, the server time and limit %q on %s", msg.Payload, msg.Channel, ticket, token, limit, channel)
	}
	sec, err1 := strconv.ParseInt(fields[2], 10, 64)
	usec, err2 := strconv.ParseInt(fields[3], 10, 64)
	if err1 != nil || err2 != nil || usec < 0 || usec >= 1e6 {
		t.Fatalf("grant message time: got %q %q, want TIME's seconds and microseconds", fields[2], fields[3])
	}
	if at := sec*1e6 + usec; at < before || at > after {
		t.Fatalf("grant message time: got %d µs, want the server clock during the release, between %d and %d", at, before, after)
	}
}

// serverMicros reads the server clock in microseconds.
func serverMicros(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now.UnixMicro()
}

// subscribe subscribes to channel and waits for the confirmation.
func subscribe(t *testing.T, c *redis.Client, channel string) *redis.PubSub {
	t.Helper()
	ps := c.Subscribe(t.Context(), channel)
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestHandoffGrantsTheWaitersKind: a release hands the lock over as the
// waiter runs it, whatever the releaser's kind: a token for a correctness
// waiter, none for an efficiency one.
func TestHandoffGrantsTheWaitersKind(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.Set(ctx, "lock:fence", "6", 0)
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		subscribe(t, b.Client, "chan")
		for _, w := range []struct{ owner, kind string }{{"fenced", "f"}, {"plain", "e"}, {"floored", "c"}} {
			queued(t, waitReply(t, b, w.owner, w.kind, entryOf(w.owner, w.kind, 0, 0, "chan"), "", ""), 3)
		}
		for _, step := range []struct {
			release, want string
			reply         any
		}{{"holder", "fenced:7*", "7"}, {"fenced:7", "plain*", int64(2)}} {
			if reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, lockKeys, step.release, "0", "", "0")); err != nil || reply != step.reply {
				t.Fatalf("release of %s: got %v, %v, want %v", step.release, reply, err, step.reply)
			}
			if v := lockValue(t, b); v != step.want {
				t.Fatalf("after the release of %s the lock holds %q, want %q", step.release, v, step.want)
			}
		}
		// A clock-floor waiter gets the server clock at the release as its
		// token, and the counter follows.
		before := serverMicros(t, b.Client)
		got, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, lockKeys, "plain", "0", "", "0"))
		reply, _ := got.(string)
		after := serverMicros(t, b.Client)
		token, perr := strconv.ParseInt(reply, 10, 64)
		if err != nil || perr != nil || token < before || token > after {
			t.Fatalf("release of plain to a clock-floor waiter: got %q, %v, want the server clock, between %d and %d", reply, err, before, after)
		}
		if v, c := lockValue(t, b), b.Client.Get(ctx, "lock:fence").Val(); v != "floored:"+reply+"*" || c != reply {
			t.Fatalf("after the clock-floor grant: lock %q, counter %q, want %q and %q", v, c, "floored:"+reply+"*", reply)
		}
	})
}

// TestWaitPlacesAfterAnEntryAheadOfTheClock: when the last entry's place is
// not behind the server clock (a clock that stepped back, or froze), a new
// entry goes just after it, so arrival order holds.
func TestWaitPlacesAfterAnEntryAheadOfTheClock(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		ahead := serverMicros(t, b.Client) + int64(time.Hour/time.Microsecond)
		if err := b.Client.ZAdd(ctx, "lock:queue", redis.Z{Score: float64(ahead), Member: entryOf("first", "e", 0, 0, "chan")}).Err(); err != nil {
			t.Fatal(err)
		}
		got := queued(t, waitReply(t, b, "second", "e", entryOf("second", "e", 0, 0, "chan"), "", ""), 3)
		if want := strconv.FormatInt(ahead+1, 10); got != want {
			t.Fatalf("wait behind an entry at %d: place %s, want %s", ahead, got, want)
		}
	})
}

// TestWaitIsIdempotent: a wait sent again by go-redis after a lost reply
// finds its entry queued by the first send, and reports the same place.
func TestWaitIsIdempotent(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		b.Client.Set(t.Context(), "lock", "holder", time.Minute)
		e := entryOf("w", "e", 0, 0, "chan")
		first := queued(t, waitReply(t, b, "w", "e", e, "", ""), 3)
		if again := queued(t, waitReply(t, b, "w", "e", e, "", ""), 3); again != first {
			t.Fatalf("the same wait sent again: place %s, want the first send's %s", again, first)
		}
		next := entryOf("w", "e", 0, 1, "chan")
		b.Client.ZRem(t.Context(), "lock:queue", e)
		for range 2 { // a requeue, sent twice
			if got := queued(t, waitReply(t, b, "w", "e", next, first, e), 3); got != first {
				t.Fatalf("requeue: place %s, want %s", got, first)
			}
		}
		if n := b.Client.ZCard(t.Context(), "lock:queue").Val(); n != 1 {
			t.Fatalf("queue: %d entries, want 1", n)
		}
	})
}

// TestHandoffDropsMalformedEntries: a queue entry that does not parse (one
// written by something other than wait.lua) is dropped, even with a live
// subscriber on its channel, and the release goes on to the next entry
// rather than failing.
func TestHandoffDropsMalformedEntries(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		// Marked as queued for: the entries below are written by hand, not
		// by wait.lua, which would have marked it.
		b.Client.Set(ctx, "lock", "holder*", time.Minute)
		b.Client.Set(ctx, "lock:fence", "5", 0)
		listen := subscribe(t, b.Client, "chan")
		malformed := []string{
			"",
			"owner 60000 e 0 ticket",            // no channel
			"owner 60000 e 0 ticket ",           // empty channel
			" 60000 e 0 ticket chan",            // empty owner
			"owner 6000x e 0 ticket chan",       // ttl not a number
			"owner  e 0 ticket chan",            // empty ttl
			"owner 1234567890123456 e 0 t chan", // ttl of more than 15 digits
			"owner 0 e 0 ticket chan",           // a zero ttl, which PX refuses
			"owner 060000 f 0 ticket chan",      // a leading zero
			"owner 60000 x 0 ticket chan",       // unknown kind
			"owner 60000 ee 0 ticket chan",      // unknown kind
			"owner 60000 e 0  chan",             // empty ticket
			"owner 60000 e x ticket chan",       // patience not a number
			"owner 60000 e -5 ticket chan",      // negative patience
			"owner 60000 e ticket chan",         // the old grammar, without patience
		}
		var z []redis.Z
		for i, m := range malformed {
			z = append(z, redis.Z{Score: float64(i + 1), Member: m})
		}
		z = append(z, redis.Z{Score: 100, Member: entryOf("good", "e", 0, 0, "chan")})
		if err := b.Client.ZAdd(ctx, "lock:queue", z...).Err(); err != nil {
			t.Fatal(err)
		}
		before := serverMicros(t, b.Client)
		if reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, lockKeys, "holder", "0", "", "0")); err != nil || reply != int64(2) {
			t.Fatalf("release: got %v, %v, want 2, handed to the one well-formed entry", reply, err)
		}
		if v := lockValue(t, b); v != "good*" {
			t.Fatalf("the lock holds %q, want %q", v, "good*")
		}
		if n := b.Client.ZCard(ctx, "lock:queue").Val(); n != 0 {
			t.Fatalf("queue: got %d entries, want every malformed one dropped", n)
		}
		if n := b.Client.Get(ctx, "lock:fence").Val(); n != "5" {
			t.Fatalf("fence counter: got %s, want 5: no token spent on a malformed entry", n)
		}
		expectGrant(t, listen, "chan", "id-good.0", "-", before, serverMicros(t, b.Client))
	})
}

// TestHandoffJudgesNoPatience: the first entry was queued 30 s ago by the
// server's clock with a patience of 20 s (as an earlier release wrote it;
// the same as a clock stepped 30 s forward since it queued): a release
// still hands it the lock. The server's clock can step, so a waiter's
// patience is its own to judge (it leaves the queue when it gives up).
func TestHandoffJudgesNoPatience(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.Set(ctx, "lock", "holder*", time.Minute)
		b.Client.Set(ctx, "lock:fence", "5", 0)
		listen := subscribe(t, b.Client, "chan")
		now := serverMicros(t, b.Client)
		if err := b.Client.ZAdd(ctx, "lock:queue",
			redis.Z{Score: float64(now - 30_000_000), Member: entryOf("first", "f", 20000, 0, "chan")},
			redis.Z{Score: float64(now - 1_000_000), Member: entryOf("second", "f", 0, 3, "chan")},
		).Err(); err != nil {
			t.Fatal(err)
		}
		if reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, lockKeys, "holder", "0", "", "0")); err != nil || reply != "6" {
			t.Fatalf("release: got %v, %v, want token 6, handed to the first waiter", reply, err)
		}
		if v := lockValue(t, b); v != "first:6*" {
			t.Fatalf("the lock holds %q, want the first waiter's grant", v)
		}
		expectGrant(t, listen, "chan", "id-first.0", "6", now, serverMicros(t, b.Client))
	})
}

// TestWaitRequeuesAnEntryThatLeft: a waiter whose entry is still queued
// keeps it; one whose entry left the queue without a grant it could use
// (popped while it was paused, lost in a restart) queues its next entry at
// its old place, ahead of the waiters that came after it.
func TestWaitRequeuesAnEntryThatLeft(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		places := map[string]string{}
		for _, owner := range []string{"first", "second"} {
			places[owner] = queued(t, waitReply(t, b, owner, "e", entryOf(owner, "e", 0, 0, "chan"), "", ""), 3)
		}
		second := waitReply(t, b, "second", "e", entryOf("second", "e", 0, 1, "chan"), places["second"], entryOf("second", "e", 0, 0, "chan"))
		if queued(t, second, 0) != places["second"] {
			t.Fatalf("second waiting again: got %v, want its entry kept at %s", second, places["second"])
		}
		b.Client.ZRem(ctx, "lock:queue", entryOf("first", "e", 0, 0, "chan"))
		first := waitReply(t, b, "first", "e", entryOf("first", "e", 0, 1, "chan"), places["first"], entryOf("first", "e", 0, 0, "chan"))
		if queued(t, first, 3) != places["first"] {
			t.Fatalf("first waiting again after its entry left: got %v, want its next entry queued at %s", first, places["first"])
		}
		got, err := b.Client.ZRangeWithScores(ctx, "lock:queue", 0, -1).Result()
		if err != nil || len(got) != 2 || got[0].Member != entryOf("first", "e", 0, 1, "chan") || got[1].Member != entryOf("second", "e", 0, 0, "chan") ||
			strconv.FormatFloat(got[0].Score, 'f', -1, 64) != places["first"] {
			t.Fatalf("queue: got %v, %v, want first's next entry at %s, then second", got, err, places["first"])
		}
	})
}

// TestWaitKeepsTheQueue: the wait that makes the queue gives it the holder's
// remaining ttl and ten seconds more; a waiter's later attempt extends it to
// that again, or keeps it without an expiry while the holder's key has none.
func TestWaitKeepsTheQueue(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		e0, e1 := entryOf("w", "e", 0, 0, "chan"), entryOf("w", "e", 0, 1, "chan")
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		place := queued(t, waitReply(t, b, "w", "e", e0, "", ""), 3)
		if ttl := b.Client.PTTL(ctx, "lock:queue").Val(); ttl <= 60*time.Second || ttl > 70*time.Second {
			t.Fatalf("new queue ttl: got %v, want the holder's minute and ten seconds more", ttl)
		}
		b.Client.PExpire(ctx, "lock:queue", 5*time.Second)
		queued(t, waitReply(t, b, "w", "e", e1, place, e0), 0)
		if ttl := b.Client.PTTL(ctx, "lock:queue").Val(); ttl <= 60*time.Second || ttl > 70*time.Second {
			t.Fatalf("queue ttl after the waiter's next attempt: got %v, want it extended to 70s", ttl)
		}
		b.Client.Set(ctx, "lock", "holder", 0) // set by hand without expiry
		if got := waitReply(t, b, "w", "e", e1, place, e0); got[1] != int64(-1) {
			t.Fatalf("wait behind a holder without expiry: got %v, want ttl -1", got)
		}
		if ttl := b.Client.PTTL(ctx, "lock:queue").Val(); ttl != -1 {
			t.Fatalf("queue ttl behind a holder without expiry: got %v, want none (-1)", ttl)
		}
	})
}

// TestQueuedMark: a waiter that queues marks the holder's value as queued
// for; the holder's refresh, ttl and release still know it as theirs, and a
// release looks at the queue only when the mark is there, so that the
// release of a lock nobody waited for runs no queue command.
func TestQueuedMark(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		release := func(value string) any {
			t.Helper()
			reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, lockKeys, value, "0", "", "0"))
			if err != nil {
				t.Fatalf("release of %s: %v", value, err)
			}
			return reply
		}
		// Unmarked, with an entry written by hand: the release skips the
		// queue and deletes the lock.
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		b.Client.ZAdd(ctx, "lock:queue", redis.Z{Score: 1, Member: entryOf("stray", "e", 0, 0, "chan")})
		if got := release("holder"); got != int64(1) {
			t.Fatalf("release of an unmarked lock: got %v, want 1 (deleted)", got)
		}
		if n := b.Client.ZCard(ctx, "lock:queue").Val(); n != 1 {
			t.Fatalf("queue after releasing an unmarked lock: got %d entries, want the stray one untouched", n)
		}
		b.Client.Del(ctx, "lock:queue")

		b.Client.Set(ctx, "lock", "holder", time.Minute)
		subscribe(t, b.Client, "chan")
		queued(t, waitReply(t, b, "w", "e", entryOf("w", "e", 0, 0, "chan"), "", ""), 3)
		if v := lockValue(t, b); v != "holder*" {
			t.Fatalf("after a waiter queued: the lock holds %q, want %q", v, "holder*")
		}
		if got, err := redistest.Script(scripts.Refresh).Run(ctx, b.Client, []string{"lock"}, "holder", 60000).Int64(); err != nil || got != 1 {
			t.Fatalf("the holder's refresh of a marked lock: got %d, %v, want 1", got, err)
		}
		if got, err := redistest.Script(scripts.PTTL).Run(ctx, b.Client, []string{"lock"}, "holder").Int64(); err != nil || got <= 0 {
			t.Fatalf("the holder's ttl of a marked lock: got %d, %v, want its ttl", got, err)
		}
		if got := release("holder"); got != int64(2) {
			t.Fatalf("release of a marked lock: got %v, want 2 (handed to the waiter)", got)
		}
	})
}

// TestRefreshKeepsAnExpiringCounter: with a counter that expires with the
// lease (kind 't'), a refresh keeps the counter at least as long as the
// lease it restarts.
func TestRefreshKeepsAnExpiringCounter(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.Set(ctx, "lock", "o:5", time.Second)
		b.Client.Set(ctx, "lock:fence", "5", time.Second)
		if got, err := redistest.Script(scripts.Refresh).Run(ctx, b.Client, []string{"lock", "lock:fence"}, "o:5", 60000, "t").Int64(); err != nil || got != 1 {
			t.Fatalf("refresh: got %d, %v, want 1", got, err)
		}
		if ttl := b.Client.PTTL(ctx, "lock:fence").Val(); ttl <= 59*time.Second {
			t.Fatalf("counter ttl after the refresh: got %v, want the lease's minute", ttl)
		}
		b.Client.Set(ctx, "lock:fence", "5", time.Hour)
		redistest.Script(scripts.Refresh).Run(ctx, b.Client, []string{"lock", "lock:fence"}, "o:5", 60000, "t")
		if ttl := b.Client.PTTL(ctx, "lock:fence").Val(); ttl <= 59*time.Minute {
			t.Fatalf("a longer counter ttl after the refresh: got %v, want it kept at an hour", ttl)
		}
	})
}
