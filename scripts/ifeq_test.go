package scripts_test

import (
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// TestIfEqScripts: del_if_eq and expire_if_eq, the plain path's release and
// refresh where the server has no DELEX or SET IFEQ, act on a lock holding
// exactly the caller's bare grant, as the commands do, and leave every
// other value be (another owner's, the caller's with the mark of waiters),
// as well as a gone key; a second send finds nothing to delete, and
// restarts the ttl again.
func TestIfEqScripts(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		run := func(s *scripts.Script, args ...any) int64 {
			t.Helper()
			n, err := redistest.Script(s).Run(ctx, b.Client, []string{"lock"}, args...).Int64()
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			return n
		}
		for _, other := range []string{"other", "owner*" + "99999999999999", ""} {
			b.Client.Del(ctx, "lock")
			if other != "" {
				b.Client.Set(ctx, "lock", other, time.Second)
			}
			if n := run(scripts.ExpireIfEq, "owner", 60000); n != 0 {
				t.Errorf("expire_if_eq on %q: %d, want 0", other, n)
			}
			if n := run(scripts.DelIfEq, "owner"); n != 0 {
				t.Errorf("del_if_eq on %q: %d, want 0", other, n)
			}
			if other != "" && b.Client.Get(ctx, "lock").Val() != other {
				t.Errorf("the scripts changed %q", other)
			}
			if ttl := b.Client.PTTL(ctx, "lock").Val(); other != "" && ttl > time.Second {
				t.Errorf("expire_if_eq restarted the ttl of %q: %v", other, ttl)
			}
		}
		b.Client.Set(ctx, "lock", "owner", time.Second)
		for send := 1; send <= 2; send++ {
			if n := run(scripts.ExpireIfEq, "owner", 60000); n != 1 {
				t.Fatalf("send %d: expire_if_eq of the holder: %d, want 1", send, n)
			}
			if ttl := b.Client.PTTL(ctx, "lock").Val(); ttl < 50*time.Second {
				t.Fatalf("send %d: after expire_if_eq the ttl is %v, want about a minute", send, ttl)
			}
		}
		if n := run(scripts.DelIfEq, "owner"); n != 1 {
			t.Fatalf("del_if_eq of the holder: %d, want 1", n)
		}
		if n := run(scripts.DelIfEq, "owner"); n != 0 {
			t.Fatalf("del_if_eq sent again: %d, want 0 (nothing to delete)", n)
		}
		if b.Client.Exists(ctx, "lock").Val() != 0 {
			t.Fatal("the lock is still there")
		}
	})
}
