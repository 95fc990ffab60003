package efficiency_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// plainServer reports whether the server c talks to has a plain
// compare-and-delete (DELEX or DELIFEQ), and so SET IFEQ: the plain path's
// commands.
func plainServer(t *testing.T, c redis.UniversalClient) bool {
	t.Helper()
	infos, err := c.Do(t.Context(), "COMMAND", "INFO", "DELEX", "DELIFEQ").Slice()
	if err != nil || len(infos) != 2 {
		return false // miniredis answers with its whole table: the Locker finds none
	}
	return infos[0] != nil || infos[1] != nil
}

// TestPlainPath: an uncontended lock is refreshed and released by the plain
// commands where the server has them (SET IFEQ PX, DELEX or DELIFEQ), by
// their least scripts where it has not (expire_if_eq, del_if_eq), and by
// the full scripts on miniredis, asking which once; under contention (a
// waiter has queued, and marked the value) the plain command finds no
// match and the full script runs as before: the refresh keeps the lease,
// the release hands the lock to the waiter.
func TestPlainPath(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		plain := plainServer(t, b.Client)
		real := b.Real()
		sent := &sentScripts{}
		b.Client.AddHook(sent)
		l := newLocker(t, b)
		lock, err := l.TryObtain(ctx, "plain", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		names := sent.take()
		t.Logf("plain commands: %v; uncontended, the client sent %v", plain, names)
		full := slices.Contains(names, "release") || slices.Contains(names, "refresh")
		least := slices.Contains(names, "del_if_eq") || slices.Contains(names, "expire_if_eq")
		switch {
		case plain && (full || least || !slices.ContainsFunc(names, isPlain)):
			t.Fatalf("uncontended, on a server with plain commands: sent %v, want those commands and no script", names)
		case !plain && real && (full || !least):
			t.Fatalf("uncontended, on a server without plain commands: sent %v, want del_if_eq and expire_if_eq, not the full scripts", names)
		case !real && (!full || least):
			t.Fatalf("uncontended, on miniredis: sent %v, want the full scripts", names)
		}
		if n := count(names, "command"); n != 1 {
			t.Errorf("the Locker asked for the plain commands %d times, want once", n)
		}
		if b.Client.Exists(ctx, "leasekit:{plain}").Val() != 0 {
			t.Error("the lock key is still there after Release")
		}

		// Contended: the release, then (after a lost lease's wait) the refresh.
		for _, op := range []string{"Release", "Refresh"} {
			l := newLocker(t, b) // fresh: it has not seen the lock contended
			lock, err := l.TryObtain(ctx, "plain", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			waiter := newLocker(t, b)
			got := make(chan error, 1)
			go func() {
				w, err := waiter.Obtain(ctx, "plain", time.Minute)
				if err == nil {
					err = w.Release(ctx)
				}
				got <- err
			}()
			awaitQueued(t, b.Client, "leasekit:{plain}:queue", 1)
			sent.take()
			if op == "Refresh" {
				if err := lock.Refresh(ctx, time.Minute); err != nil {
					t.Fatalf("contended Refresh: %v", err)
				}
				if names := sent.take(); !slices.Contains(names, "refresh") {
					t.Fatalf("contended Refresh sent %v, want the script", names)
				}
			}
			if err := lock.Release(ctx); err != nil {
				t.Fatalf("contended Release (after %s): %v", op, err)
			}
			names := sent.take()
			if !slices.Contains(names, "release") {
				t.Fatalf("contended Release sent %v, want the script", names)
			}
			tried := slices.ContainsFunc(names, isPlain) || slices.Contains(names, "del_if_eq")
			if real && op == "Release" && !tried {
				t.Fatalf("contended Release of a Locker that had not seen the lock contended sent %v, want the plain delete first", names)
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiter, handed the lock: %v", err)
			}
		}
	})
}

// sentScripts is a go-redis hook that records what the client sends: a
// command's name, lowercase, or for EVALSHA the script's name.
type sentScripts struct{ commandNames }

// byHash names the protocol's scripts by SHA1.
var byHash = func() map[string]string {
	m := make(map[string]string)
	for _, s := range scripts.All {
		m[s.Hash()] = s.Name
	}
	return m
}()

// ProcessHook records the command.
func (h *sentScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if args := cmd.Args(); name == "evalsha" && len(args) > 1 {
			if s, ok := args[1].(string); ok && byHash[s] != "" {
				name = byHash[s]
			}
		}
		h.mu.Lock()
		h.names = append(h.names, name)
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

// TestPlainReplyLost: a plain refresh or release whose reply is lost is
// sent again by go-redis on a fresh connection (faultproxy); the refresh
// holds the lease, and the release reports the lock released, not lost,
// though its resend found nothing to delete. So does a Release called
// again after one that failed (a client that does not resend).
func TestPlainReplyLost(t *testing.T) {
	s := redistest.Start(t)
	direct := s.Client(t)
	if !plainServer(t, direct) {
		t.Logf("the server has no plain commands: their scripts, del_if_eq and expire_if_eq, lose the replies")
	}
	p, err := faultproxy.New(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	plainCmd := func(names ...string) func([]byte) bool {
		return func(c []byte) bool {
			lc := bytes.ToLower(c)
			for _, n := range names {
				if bytes.Contains(lc, []byte("\r\n"+n+"\r\n")) {
					return true
				}
			}
			return false
		}
	}
	for _, tc := range []struct {
		name    string
		retries int
	}{{"go-redis resends", 3}, {"the caller calls again", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: tc.retries})
			t.Cleanup(func() { _ = c.Close() })
			l := efficiency.New(c)
			t.Cleanup(func() { _ = l.Close() })
			lock, err := l.TryObtain(ctx, "lost-"+tc.name, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			again := func(what string, call func() error) {
				t.Helper()
				err := call()
				if tc.retries < 0 {
					if err == nil {
						t.Fatalf("%s with its reply lost and no resend: no error, want the lost reply", what)
					}
					err = call()
				}
				if err != nil {
					t.Fatalf("%s with its reply lost: %v, want it done", what, err)
				}
			}
			p.CutAfterRequest(plainCmd("ifeq", "evalsha"))
			again("Refresh", func() error { return lock.Refresh(ctx, time.Minute) })
			if ttl := direct.PTTL(ctx, "leasekit:{lost-"+tc.name+"}").Val(); ttl < 50*time.Second {
				t.Fatalf("after the refresh the lease has %v left, want about a minute", ttl)
			}
			p.CutAfterRequest(plainCmd("delex", "delifeq", "evalsha"))
			again("Release", func() error { return lock.Release(ctx) })
			if direct.Exists(ctx, "leasekit:{lost-"+tc.name+"}").Val() != 0 {
				t.Fatal("the lock key is still there after Release")
			}
		})
	}
}

// count is how many of names are name.
func count(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}

// awaitQueued waits until queue has n entries.
func awaitQueued(t *testing.T, c redis.UniversalClient, queue string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); c.ZCard(context.Background(), queue).Val() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d entries in %s", n, queue)
		}
	}
}
