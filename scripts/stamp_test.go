package scripts_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// TestRefreshStoresAnotherToken: refresh with ARGV[4] (the stamp of a token
// drawn from a token source, internal/lease's tokens.go) stores that grant
// in place of the caller's and restarts the lease; a resend of the same call
// (its reply lost) finds the new grant and its mark, and counts it the
// caller's; the same grant without the mark (the scripts granted it, with
// a counter's token equal to the one drawn) is not; another owner's grant,
// a gone key and a lapsed lease are left as they are. A value with the
// mark of waiters keeps the mark, with the new lease's expiry.
func TestRefreshStoresAnotherToken(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		stamp := func(from, to string) int64 {
			t.Helper()
			keys := []string{"lock", "lock:fence", scripts.StampKey("lock", to)}
			n, err := redistest.Script(scripts.Refresh).Run(ctx, b.Client, keys, from, 60000, "", to).Int64()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		b.Client.Set(ctx, "lock", "o:5", time.Second)
		for send := 1; send <= 2; send++ {
			if n := stamp("o:5", "o:9001"); n != 1 {
				t.Fatalf("send %d: stamp by the holder: %d, want 1", send, n)
			}
			if v := b.Client.Get(ctx, "lock").Val(); v != "o:9001" {
				t.Fatalf("send %d: the lock holds %q, want o:9001", send, v)
			}
			if ttl := b.Client.PTTL(ctx, "lock").Val(); ttl <= time.Second {
				t.Fatalf("send %d: ttl %v, want the lease restarted at 60s", send, ttl)
			}
		}
		if ttl := b.Client.PTTL(ctx, scripts.StampKey("lock", "o:9001")).Val(); ttl <= 0 || ttl >= time.Minute {
			t.Fatalf("the stamp's mark has ttl %v, want one short of the lease's 60s", ttl)
		}
		b.Client.Set(ctx, "lock", "o:7", time.Minute)
		b.Client.Set(ctx, "lock", "o:9010", time.Minute) // as the scripts grant
		if n := stamp("o:7", "o:9010"); n != -1 || b.Client.Exists(ctx, scripts.StampKey("lock", "o:9010")).Val() != 0 {
			t.Fatalf("stamp of a grant the scripts made with the token drawn: %d, want -1 and no mark", n)
		}
		b.Client.Set(ctx, "lock", "o:9001", time.Minute)
		if n := stamp("p:5", "p:9002"); n != -1 || b.Client.Get(ctx, "lock").Val() != "o:9001" {
			t.Fatalf("stamp by another owner: %d, the lock holds %q; want -1 and nothing changed", n, b.Client.Get(ctx, "lock").Val())
		}
		b.Client.Del(ctx, "lock")
		if n := stamp("o:9001", "o:9003"); n != 0 || b.Client.Exists(ctx, "lock").Val() != 0 {
			t.Fatalf("stamp of a gone key: %d, want 0 and no key", n)
		}

		now := serverMicros(t, b.Client) / 1000
		b.Client.Set(ctx, "lock", "o:6*"+strconv.FormatInt(now+5000, 10), time.Minute)
		if n := stamp("o:6", "o:9004"); n != 1 {
			t.Fatalf("stamp of a marked grant: %d, want 1", n)
		}
		v := b.Client.Get(ctx, "lock").Val()
		grant, expiry, marked := strings.Cut(v, "*")
		if e, _ := strconv.ParseInt(expiry, 10, 64); !marked || grant != "o:9004" || e < now+50000 {
			t.Fatalf("a marked grant stamped holds %q, want o:9004 with the mark and the new lease's expiry", v)
		}
		lapse(t, b, "o:9004")
		if n := stamp("o:9004", "o:9005"); n != 0 || scripts.Grant(b.Client.Get(ctx, "lock").Val()) != "o:9004" {
			t.Fatalf("stamp of a lapsed lease: %d, want 0 and nothing changed", n)
		}
	})
}
