package scripts_test

import (
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// markedKeys are the release script's KEYS with the mark of the grant it
// ends (internal/lease's EndedKey names it from the grant's value).
var markedKeys = append(append([]string(nil), lockKeys...), "lock:ended:g")

// breakKeys are a break's: also the mark of the break call.
func breakKeys(call string) []string {
	return append(append([]string(nil), markedKeys...), "lock:ended:"+call)
}

// TestReleaseMark: a release that names its grant exactly leaves a mark of
// it; a second send of the same call (a client's retry after a lost reply)
// finds the grant gone, deleted or handed to the next waiter, replies 1 from
// the mark, and leaves the next holder's grant be. A break leaves a mark of
// its own, which the broken holder's release reads as -3, and a second send
// of the break as 1; a second send of a break never ends a grant, even one
// of the value it was sent for. Without the mark key, a second release says
// the key is gone.
func TestReleaseMark(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		// release runs the release script; a break (match "2") is the
		// break call "n1" (its mark the last key).
		release := func(keys []string, value, match string) any {
			t.Helper()
			if match == "2" {
				keys = breakKeys("n1")
			}
			reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, keys, value, match, "", "0", "", "10000"))
			if err != nil {
				t.Fatalf("release of %q (ARGV[2] %s): %v", value, match, err)
			}
			return reply
		}
		want := func(what string, got, want any) {
			t.Helper()
			if got != want {
				t.Fatalf("%s: got %v, want %v", what, got, want)
			}
		}

		b.Client.Set(ctx, "lock", "owner", time.Minute)
		want("release", release(markedKeys, "owner", "0"), int64(1))
		want("the same release again", release(markedKeys, "owner", "0"), int64(1))
		if ttl := b.Client.PTTL(ctx, "lock:ended:g").Val(); ttl <= 0 || ttl > 10*time.Second {
			t.Fatalf("the mark's ttl: got %v, want within (0, 10s]", ttl)
		}
		b.Client.Set(ctx, "lock", "owner2", time.Minute)
		want("a release without the mark", release(lockKeys, "owner2", "0"), int64(1))
		want("it again", release(lockKeys, "owner2", "0"), int64(0))

		// Handed to the next waiter: the second send leaves its grant be.
		queueOne := func() {
			b.Client.Del(ctx, "lock:ended:g")
			b.Client.Set(ctx, "lock", "holder*", time.Minute)
			if err := b.Client.ZAdd(ctx, "lock:queue", redis.Z{Score: float64(serverMicros(t, b.Client)), Member: entryOf("next", "e", 0, 0, "chan")}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		subscribe(t, b.Client, "chan")
		queueOne()
		want("release to the next waiter", release(markedKeys, "holder", "0"), int64(2))
		want("the same release again", release(markedKeys, "holder", "0"), int64(1))
		want("the lock after both", lockValue(t, b), "next*")

		// A break, sent twice, ends the holder's grant alone.
		queueOne()
		want("break", release(markedKeys, "holder", "2"), int64(2))
		want("the same break again", release(markedKeys, "holder", "2"), int64(1))
		want("the lock after both", lockValue(t, b), "next*")
		want("the broken holder's release", release(markedKeys, "holder", "0"), int64(-3))
		want("the lock after it", lockValue(t, b), "next*")

		// A break of a grant the lock no longer holds ends nothing.
		b.Client.Del(ctx, "lock:ended:g", "lock:ended:n1")
		want("break of a grant gone", release(markedKeys, "holder", "2"), int64(-1))
		want("the lock after it", lockValue(t, b), "next*")

		// A break that found its grant gone, sent again once the lock holds
		// a grant of the same value (an efficiency waiter's next grant is
		// its owner id again), ends nothing either; another break does.
		b.Client.Del(ctx, "lock:ended:g", "lock:ended:n1", "lock")
		want("break of a lock nobody holds", release(markedKeys, "holder", "2"), int64(0))
		b.Client.Set(ctx, "lock", "holder", time.Minute)
		want("the same break again", release(markedKeys, "holder", "2"), int64(-1))
		want("the lock after it", b.Client.Get(ctx, "lock").Val(), "holder")
		if reply, err := endResult(redistest.Script(scripts.Release).Run(ctx, b.Client, breakKeys("n2"), "holder", "2", "", "0", "", "10000")); err != nil || reply != int64(1) {
			t.Fatalf("another break: got %v, %v, want 1", reply, err)
		}
	})
}
