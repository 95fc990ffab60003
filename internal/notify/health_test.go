package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// hang bounds a wait for an event that must come: a bound for a hung test,
// not a timing assertion.
const hang = 30 * time.Second

// awaitWake waits for a wake-up of w.
func awaitWake(t *testing.T, w *notify.Waiter, what string) {
	t.Helper()
	select {
	case <-w.Wake():
	case <-time.After(hang):
		t.Fatalf("%s: no wake-up after %v", what, hang)
	}
}

// await polls cond every 10 ms until it holds, or fails the test after hang.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hang); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not after %v", what, hang)
		}
	}
}

// subscribers is PUBSUB NUMSUB of channel.
func subscribers(t *testing.T, c *redis.Client, channel string) int64 {
	t.Helper()
	counts, err := c.PubSubNumSub(t.Context(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return counts[channel]
}

// grantWaiter is a Notifier on client, closed when the test ends, and a
// waiter on its channel "grants" with id "ticket", which leaves first.
func grantWaiter(t *testing.T, client *redis.Client) (*notify.Notifier, *notify.Waiter) {
	t.Helper()
	n := notify.New(port.GoRedis(client), nil)
	t.Cleanup(func() { _ = n.Close() })
	w, err := n.Join(t.Context(), "grants", "ticket")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Leave() })
	return n, w
}

// TestHalfOpenConnectionIsReplaced: the subscription connection is
// half-open (the server forgot it, the client's side is silent) while a
// waiter waits. The health check finds it dead, reopens it, and wakes the
// waiter, so that it asks Redis again; a grant published afterwards reaches
// it on the new connection.
func TestHalfOpenConnectionIsReplaced(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		p, err := faultproxy.New(b.Client.Options().Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		proxied := redis.NewClient(&redis.Options{Addr: p.Addr()})
		defer proxied.Close()
		_, w := grantWaiter(t, proxied)
		p.HalfOpenSubscriptions()
		await(t, "the server to forget the subscription", func() bool { return subscribers(t, b.Client, "grants") == 0 })
		awaitWake(t, w, "the waiter on the half-open connection")
		await(t, "the channel subscribed again", func() bool { return subscribers(t, b.Client, "grants") == 1 })
		const grant = "ticket 8 1 2"
		if err := b.Client.Publish(ctx, "grants", grant).Err(); err != nil {
			t.Fatal(err)
		}
		for {
			awaitWake(t, w, "the grant on the new connection")
			if g, ok := w.Grant(); ok {
				if g != grant {
					t.Fatalf("grant: got %q, want %q", g, grant)
				}
				break
			}
			// A wake-up of the resubscription, before the grant.
		}
	})
}

// pings is how many PINGs the server has run (real Redis), or how many
// commands of any kind (miniredis, which counts no command apart).
func pings(t *testing.T, b *redistest.Backend) int {
	t.Helper()
	if b.Mini != nil {
		return b.Mini.CommandCount()
	}
	return pingCalls(t, b.Client)
}

// pingCalls is how many PINGs the server of c has run.
func pingCalls(t *testing.T, c *redis.Client) int { return redistest.Calls(t, c, "ping") }

// TestIdleConnectionSendsNothing: a connection whose channel stays
// subscribed without waiters (a kept grant channel) sends no PING however
// long it is silent; once a waiter waits on it, a silence sends one. The
// idle check is of nothing happening, so a slow machine can only make it
// pass; the waiter's PING shows that the count would see one.
func TestIdleConnectionSendsNothing(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		n := notify.New(port.GoRedis(b.Client), nil)
		defer n.Close()
		w, err := n.Join(ctx, "grants", "ticket")
		if err != nil {
			t.Fatal(err)
		}
		w.Leave()
		before := pings(t, b)
		time.Sleep(3 * time.Second) // three times the silence that pings a waiter's connection
		if got := pings(t, b) - before; got != 0 {
			t.Fatalf("an idle connection in 3 s: got %d PINGs (miniredis: commands), want 0", got)
		}
		w, err = n.Join(ctx, "grants", "ticket")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Leave()
		await(t, "a PING on a waiter's silent connection", func() bool { return pings(t, b) > before })
	})
}

// pubsubClients lists the ids of the server's subscription connections.
func pubsubClients(t *testing.T, c *redis.Client) []string {
	t.Helper()
	list, err := c.Do(t.Context(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for line := range strings.Lines(list) {
		id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
		ids = append(ids, id)
	}
	return ids
}

// TestPausedServerKeepsTheConnection: Redis paused for longer than the
// health check waits for a PONG, with CLIENT PAUSE ALL (which holds PING
// back, on every connection) and WRITE (which does not). The check's probe
// finds that the server answers nobody, so the connection is kept, its
// subscription with it (a new one could not subscribe during the pause,
// and releases after it would skip the waiter), and the waiter is not
// woken: the same connection serves it after the pause, and it is pinged
// again.
func TestPausedServerKeepsTheConnection(t *testing.T) {
	for _, mode := range []string{"ALL", "WRITE"} {
		t.Run(mode, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client(t)
			ctx := t.Context()
			_, w := grantWaiter(t, srv.Client(t))
			ids := pubsubClients(t, admin)
			before := pingCalls(t, admin)
			// Past a second of silence, the PING, and a second more, the
			// probe; both wait for the end of the pause.
			if err := admin.Do(ctx, "CLIENT", "PAUSE", "3500", mode).Err(); err != nil {
				t.Fatal(err)
			}
			if err := admin.Set(ctx, "after-the-pause", "", 0).Err(); err != nil {
				t.Fatal(err) // a write: it waits for the end of the pause
			}
			after := pingCalls(t, admin)
			t.Logf("PINGs run by the end of the pause: %d (with ALL: the subscription's, held back, and the probe's)", after-before)
			await(t, "a PING after the pause", func() bool { return pingCalls(t, admin) > after })
			select {
			case <-w.Wake():
				t.Fatal("the waiter was woken: got its connection reopened, want it kept")
			default:
			}
			if got := pubsubClients(t, admin); strings.Join(got, ",") != strings.Join(ids, ",") {
				t.Fatalf("subscription connections after the pause: got ids %v, want %v", got, ids)
			}
			if err := admin.Publish(ctx, "grants", "ticket 8 1 2").Err(); err != nil {
				t.Fatal(err)
			}
			awaitWake(t, w, "the grant after the pause")
		})
	}
}

// TestRefusedPingIsAnAnswer: under an ACL without PING (the least-privilege
// line before the health check), the server refuses the check's PING with
// NOPERM. That is an answer, so the connection is kept, and no waiter's
// Join fails with it.
func TestRefusedPingIsAnAnswer(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := t.Context()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noping", "on", ">pw", "resetchannels", "&*", "-@all",
		"+subscribe", "+unsubscribe", "+hello").Err(); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "noping", Password: "pw", DisableIdentity: true})
	t.Cleanup(func() { _ = client.Close() })
	n, w := grantWaiter(t, client)
	await(t, "a refused PING in the ACL log", func() bool {
		entries, err := admin.ACLLog(ctx, 10).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Object == "ping" {
				return true
			}
		}
		return false
	})
	// A second channel joins on the same connection after the refusal.
	wake, err := n.Join(ctx, "wake", "")
	if err != nil {
		t.Fatalf("Join after a refused PING: %v", err)
	}
	defer wake.Leave()
	select {
	case <-w.Wake():
		t.Fatal("the waiter was woken: got its connection reopened, want it kept")
	default:
	}
	if err := admin.Publish(ctx, "grants", "ticket 8 1 2").Err(); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, w, "the grant after a refused PING")
}
