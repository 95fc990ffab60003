package scripts_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// TestHandoff drives the wait queue by hand: waiters queue in arrival order,
// a release hands the lock to the first waiter that still listens (skipping
// one whose channel has no subscriber), tells it where and when, and deletes
// the key once nobody is left. With sharded grant channels (Redis Cluster's:
// SHARDNUMSUB and SPUBLISH, which a single Redis 7 server runs too, and
// miniredis does not) on redis-server only.
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
	keys := []string{"lock", "lock:queue", "lock:fence"}
	b.Client.Set(ctx, "lock:fence", "32", 0)
	shardedArg := "0"
	if sharded {
		shardedArg = "1"
	}
	kind := "e"
	if fenced {
		kind = "f"
	}
	// token is how a grant message names the token of a grant: '-' for none.
	token := func(n int) string {
		if fenced {
			return strconv.Itoa(n)
		}
		return "-"
	}
	// value is what a grant to owner stores, given the token it should carry.
	value := func(owner string, token int) string {
		if fenced {
			return owner + ":" + strconv.Itoa(token)
		}
		return owner
	}
	entry := func(owner string) string { return owner + " 60000 " + kind + " ticket-" + owner + " chan-" + owner }
	wait := func(owner string) []any {
		t.Helper()
		reply, err := scripts.Wait.Run(ctx, b.Client, keys, owner, 60000, entry(owner), kind, "").Slice()
		if err != nil {
			t.Fatalf("wait by %s: %v", owner, err)
		}
		return reply
	}
	release := func(v, leaving string) any {
		t.Helper()
		reply, err := scripts.Release.Run(ctx, b.Client, keys, v, "0", leaving, shardedArg).Result()
		if err != nil {
			t.Fatalf("release of %q: %v", v, err)
		}
		return reply
	}
	handed := any(int64(2)) // what a release that hands the lock to a reads
	if fenced {
		handed = "34"
	}

	// A free lock: the waiter takes it at once and is not queued.
	if got := wait("holder"); got[0] != int64(1) || got[1] != value("holder", 33) {
		t.Fatalf("wait on a free lock: got %v, want [1 %s]", got, value("holder", 33))
	}
	// The holder's own retry is its grant back, not a queue entry.
	if got := wait("holder"); got[0] != int64(2) || got[1] != value("holder", 33) {
		t.Fatalf("the holder waiting again: got %v, want [2 %s], its own grant", got, value("holder", 33))
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
		got := wait(owner)
		ttl, _ := got[1].(int64)
		place, _ := got[2].(string)
		if got[0] != int64(0) || ttl <= 0 || ttl > 60000 || place == "" {
			t.Fatalf("wait by %s on a held lock: got %v, want [0 ttl place]", owner, got)
		}
		places[owner] = place
		time.Sleep(time.Millisecond) // distinct places on a fast clock
	}
	if again := wait("a"); again[0] != int64(0) || again[2] != "" {
		t.Fatalf("a waiting again: got %v, want it kept in its place (place '')", again)
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
	if v := b.Client.Get(ctx, "lock").Val(); v != value("a", 34)+lease.QueuedMark {
		t.Fatalf("after the release the lock holds %q, want %q (the dead waiter skipped, the grant marked as queued for)", v, value("a", 34)+lease.QueuedMark)
	}
	if n, _ := b.Client.Get(ctx, "lock:fence").Int(); fenced != (n == 34) || !fenced && n != 32 {
		t.Fatalf("fence counter: got %d, want 34 for correctness grants, 32 (untouched) for efficiency ones", n)
	}
	if ttl := b.Client.PTTL(ctx, "lock").Val(); ttl <= 59*time.Second {
		t.Fatalf("handed-off lock ttl: got %v, want a's 60s", ttl)
	}
	expectGrant(t, listen, "chan-a", "ticket-a", token(34), places["a"], before, serverMicros(t, b.Client))

	// b gives up: its entry goes, and the lock stays a's.
	if got := release(value("b", 0), entry("b")); got != int64(-1) {
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
// token to the waiter with ticket queued at place, made when the server clock
// read between before and after (microseconds).
func expectGrant(t *testing.T, ps *redis.PubSub, channel, ticket, token, place string, before, after int64) {
	t.Helper()
	ctx := t.Context()
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("grant message: %v", err)
	}
	fields := strings.Fields(msg.Payload)
	if msg.Channel != channel || len(fields) != 5 || fields[0] != ticket || fields[1] != token {
		t.Fatalf("grant message: got %q on %s, want %q, %q, a place and the server time on %s", msg.Payload, msg.Channel, ticket, token, channel)
	}
	got, err1 := strconv.ParseInt(fields[2], 10, 64)
	want, err2 := strconv.ParseInt(place, 10, 64)
	if err1 != nil || err2 != nil || got != want {
		t.Fatalf("grant message place: got %q, want %q", fields[2], place)
	}
	sec, err1 := strconv.ParseInt(fields[3], 10, 64)
	usec, err2 := strconv.ParseInt(fields[4], 10, 64)
	if err1 != nil || err2 != nil || usec < 0 || usec >= 1e6 {
		t.Fatalf("grant message time: got %q %q, want TIME's seconds and microseconds", fields[3], fields[4])
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

// TestHandoffGrantsTheWaitersKind: a release hands the lock over as the
// waiter runs it, whatever the releaser's kind: a token for a correctness
// waiter, none for an efficiency one.
func TestHandoffGrantsTheWaitersKind(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		keys := []string{"lock", "lock:queue", "lock:fence"}
		b.Client.Set(ctx, "lock:fence", "6", 0)
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		listen := b.Client.Subscribe(ctx, "chan")
		defer listen.Close()
		if _, err := listen.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct{ owner, kind string }{{"fenced", "f"}, {"plain", "e"}, {"floored", "c"}} {
			if err := scripts.Wait.Run(ctx, b.Client, keys, w.owner, 60000, w.owner+" 60000 "+w.kind+" t-"+w.owner+" chan", w.kind, "").Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, step := range []struct {
			release, want string
			reply         any
		}{{"holder", "fenced:7*", "7"}, {"fenced:7", "plain*", int64(2)}} {
			if reply, err := scripts.Release.Run(ctx, b.Client, keys, step.release, "0", "", "0").Result(); err != nil || reply != step.reply {
				t.Fatalf("release of %s: got %v, %v, want %v", step.release, reply, err, step.reply)
			}
			if v := b.Client.Get(ctx, "lock").Val(); v != step.want {
				t.Fatalf("after the release of %s the lock holds %q, want %q", step.release, v, step.want)
			}
		}
		// A clock-floor waiter gets the server clock at the release as its
		// token, and the counter follows.
		before := serverMicros(t, b.Client)
		reply, err := scripts.Release.Run(ctx, b.Client, keys, "plain", "0", "", "0").Text()
		after := serverMicros(t, b.Client)
		token, perr := strconv.ParseInt(reply, 10, 64)
		if err != nil || perr != nil || token < before || token > after {
			t.Fatalf("release of plain to a clock-floor waiter: got %q, %v, want the server clock, between %d and %d", reply, err, before, after)
		}
		if v, c := b.Client.Get(ctx, "lock").Val(), b.Client.Get(ctx, "lock:fence").Val(); v != "floored:"+reply+"*" || c != reply {
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
		keys := []string{"lock", "lock:queue", "lock:fence"}
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		ahead := serverMicros(t, b.Client) + int64(time.Hour/time.Microsecond)
		if err := b.Client.ZAdd(ctx, "lock:queue", redis.Z{Score: float64(ahead), Member: "first 60000 e t-first chan"}).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := scripts.Wait.Run(ctx, b.Client, keys, "second", 60000, "second 60000 e t-second chan", "e", "").Slice()
		if err != nil || len(got) != 3 || got[0] != int64(0) || got[2] != strconv.FormatInt(ahead+1, 10) {
			t.Fatalf("wait behind an entry at %d: got %v, %v, want [0 ttl %d]", ahead, got, err, ahead+1)
		}
	})
}

// TestHandoffDropsMalformedEntries: a queue entry that does not parse as
// "owner ttl kind ticket channel" (written by something other than wait.lua)
// is dropped, even with a live subscriber on its channel, and the release goes
// on to the next entry rather than failing.
func TestHandoffDropsMalformedEntries(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		keys := []string{"lock", "lock:queue", "lock:fence"}
		// Marked as queued for: the entries below are written by hand, not
		// by wait.lua, which would have marked it.
		b.Client.Set(ctx, "lock", "holder"+lease.QueuedMark, time.Minute)
		b.Client.Set(ctx, "lock:fence", "5", 0)
		listen := b.Client.Subscribe(ctx, "chan")
		defer listen.Close()
		if _, err := listen.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		malformed := []string{
			"",
			"owner 60000 e ticket",            // no channel
			"owner 60000 e ticket ",           // empty channel
			" 60000 e ticket chan",            // empty owner
			"owner 6000x e ticket chan",       // ttl not a number
			"owner  e ticket chan",            // empty ttl
			"owner 1234567890123456 e t chan", // ttl of more than 15 digits
			"owner 0 e ticket chan",           // a zero ttl, which PX refuses
			"owner 060000 f ticket chan",      // a leading zero
			"owner 60000 x ticket chan",       // unknown kind
			"owner 60000 ee ticket chan",      // unknown kind
			"owner 60000 e  chan",             // empty ticket
		}
		var z []redis.Z
		for i, m := range malformed {
			z = append(z, redis.Z{Score: float64(i + 1), Member: m})
		}
		z = append(z, redis.Z{Score: 100, Member: "good 60000 e ticket-good chan"})
		if err := b.Client.ZAdd(ctx, "lock:queue", z...).Err(); err != nil {
			t.Fatal(err)
		}
		before := serverMicros(t, b.Client)
		if reply, err := scripts.Release.Run(ctx, b.Client, keys, "holder", "0", "", "0").Result(); err != nil || reply != int64(2) {
			t.Fatalf("release: got %v, %v, want 2, handed to the one well-formed entry", reply, err)
		}
		if v := b.Client.Get(ctx, "lock").Val(); v != "good*" {
			t.Fatalf("the lock holds %q, want %q", v, "good*")
		}
		if n := b.Client.ZCard(ctx, "lock:queue").Val(); n != 0 {
			t.Fatalf("queue: got %d entries, want every malformed one dropped", n)
		}
		if n := b.Client.Get(ctx, "lock:fence").Val(); n != "5" {
			t.Fatalf("fence counter: got %s, want 5: no token spent on a malformed entry", n)
		}
		expectGrant(t, listen, "chan", "ticket-good", "-", "100", before, serverMicros(t, b.Client))
	})
}

// TestWaitKeepsAnEntryAtItsPlace: a waiter that an earlier attempt queued
// passes its place, and stays there; if the queue lost its entry (a
// restart, a release that found its channel without a subscriber), it goes
// back at that place, ahead of the waiters that came after it.
func TestWaitKeepsAnEntryAtItsPlace(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		keys := []string{"lock", "lock:queue", "lock:fence"}
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		entry := func(owner string) string { return owner + " 60000 e t-" + owner + " chan" }
		wait := func(owner, place string) []any {
			t.Helper()
			got, err := scripts.Wait.Run(ctx, b.Client, keys, owner, 60000, entry(owner), "e", place).Slice()
			if err != nil || len(got) != 3 || got[0] != int64(0) {
				t.Fatalf("wait by %s (place %q): got %v, %v, want [0 ttl place]", owner, place, got, err)
			}
			return got
		}
		places := map[string]string{}
		for _, owner := range []string{"first", "second"} {
			place, _ := wait(owner, "")[2].(string)
			if place == "" {
				t.Fatalf("wait by %s: got no place, want the entry's score", owner)
			}
			places[owner] = place
		}
		if got := wait("second", places["second"]); got[2] != "" {
			t.Fatalf("second waiting again at its place: got %v, want place '' (kept)", got)
		}
		b.Client.ZRem(ctx, "lock:queue", entry("first"))
		if got := wait("first", places["first"]); got[2] != "" {
			t.Fatalf("first waiting again after its entry was lost: got %v, want place '' (its place is unchanged)", got)
		}
		got, err := b.Client.ZRangeWithScores(ctx, "lock:queue", 0, -1).Result()
		if err != nil || len(got) != 2 || got[0].Member != entry("first") || got[1].Member != entry("second") ||
			strconv.FormatFloat(got[0].Score, 'f', -1, 64) != places["first"] {
			t.Fatalf("queue: got %v, %v, want first at %s, then second", got, err, places["first"])
		}
	})
}

// TestWaitKeepsTheQueue: the wait that makes the queue gives it the holder's
// remaining ttl and ten seconds more; a waiter's later attempt, which passes
// its place, extends it to that again, or keeps it without an expiry while the
// holder's key has none.
func TestWaitKeepsTheQueue(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		keys := []string{"lock", "lock:queue", "lock:fence"}
		const entry = "waiter 60000 e t-waiter chan"
		wait := func(place string) string {
			t.Helper()
			got, err := scripts.Wait.Run(ctx, b.Client, keys, "waiter", 60000, entry, "e", place).Slice()
			if err != nil || len(got) != 3 || got[0] != int64(0) {
				t.Fatalf("wait (place %q): got %v, %v, want [0 ttl place]", place, got, err)
			}
			p, _ := got[2].(string)
			return p
		}
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		place := wait("")
		if ttl := b.Client.PTTL(ctx, "lock:queue").Val(); ttl <= 60*time.Second || ttl > 70*time.Second {
			t.Fatalf("new queue ttl: got %v, want the holder's minute and ten seconds more", ttl)
		}
		b.Client.PExpire(ctx, "lock:queue", 5*time.Second)
		wait(place)
		if ttl := b.Client.PTTL(ctx, "lock:queue").Val(); ttl <= 60*time.Second || ttl > 70*time.Second {
			t.Fatalf("queue ttl after the waiter's next attempt: got %v, want it extended to 70s", ttl)
		}
		b.Client.Persist(ctx, "lock")
		wait(place)
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
		keys := []string{"lock", "lock:queue", "lock:fence"}
		release := func(value string) any {
			t.Helper()
			reply, err := scripts.Release.Run(ctx, b.Client, keys, value, "0", "", "0").Result()
			if err != nil {
				t.Fatalf("release of %s: %v", value, err)
			}
			return reply
		}
		// Unmarked, with an entry written by hand: the release skips the
		// queue and deletes the lock.
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		b.Client.ZAdd(ctx, "lock:queue", redis.Z{Score: 1, Member: "stray 60000 e t chan"})
		if got := release("holder"); got != int64(1) {
			t.Fatalf("release of an unmarked lock: got %v, want 1 (deleted)", got)
		}
		if n := b.Client.ZCard(ctx, "lock:queue").Val(); n != 1 {
			t.Fatalf("queue after releasing an unmarked lock: got %d entries, want the stray one untouched", n)
		}
		b.Client.Del(ctx, "lock:queue")

		b.Client.Set(ctx, "lock", "holder", time.Minute)
		listen := b.Client.Subscribe(ctx, "chan")
		defer listen.Close()
		if _, err := listen.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		if err := scripts.Wait.Run(ctx, b.Client, keys, "w", 60000, "w 60000 e t-w chan", "e", "").Err(); err != nil {
			t.Fatal(err)
		}
		if v := b.Client.Get(ctx, "lock").Val(); v != "holder"+lease.QueuedMark {
			t.Fatalf("after a waiter queued: the lock holds %q, want %q", v, "holder"+lease.QueuedMark)
		}
		if got, err := scripts.Refresh.Run(ctx, b.Client, []string{"lock"}, "holder", 60000).Int64(); err != nil || got != 1 {
			t.Fatalf("the holder's refresh of a marked lock: got %d, %v, want 1", got, err)
		}
		if got, err := scripts.PTTL.Run(ctx, b.Client, []string{"lock"}, "holder").Int64(); err != nil || got <= 0 {
			t.Fatalf("the holder's ttl of a marked lock: got %d, %v, want its ttl", got, err)
		}
		if got := release("holder"); got != int64(2) {
			t.Fatalf("release of a marked lock: got %v, want 2 (handed to the waiter)", got)
		}
	})
}
