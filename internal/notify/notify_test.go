package notify_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestWakesAfterResubscribe(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		n := notify.New(port.GoRedis(b.Client), nil)
		defer n.Close()
		// Subscribe and unsubscribe the channel many times: each Join must
		// wait for its own confirmation, not an earlier one, or a release
		// published right after Join could go unheard.
		for i := range 50 {
			w, err := n.Join(ctx, "ch", "")
			if err != nil {
				t.Fatalf("join %d: %v", i, err)
			}
			if err := b.Client.Publish(ctx, "ch", "").Err(); err != nil {
				t.Fatal(err)
			}
			<-w.Wake()
			w.Leave()
		}
	})
}

func TestWakesOneWaiterPerMessage(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		n := notify.New(port.GoRedis(b.Client), nil)
		defer n.Close()
		first, err := n.Join(ctx, "ch", "")
		if err != nil {
			t.Fatal(err)
		}
		second, err := n.Join(ctx, "ch", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Publish(ctx, "ch", "").Err(); err != nil {
			t.Fatal(err)
		}
		<-first.Wake()
		select {
		case <-second.Wake():
			t.Fatal("one message woke two waiters")
		default:
		}
		// A waiter that leaves with a wake-up it did not use passes it on,
		// to the oldest waiter left.
		third, err := n.Join(ctx, "ch", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Publish(ctx, "ch", "").Err(); err != nil {
			t.Fatal(err)
		}
		awaitPending(t, first)
		first.Leave()
		select {
		case <-second.Wake():
		case <-third.Wake():
			t.Fatal("the passed-on wake-up skipped the older waiter")
		}
		second.Leave()
		third.Leave()
	})
}

func TestCloseReleasesJoin(t *testing.T) {
	b := redistest.Mini(t)
	n := notify.New(port.GoRedis(b.Client), nil)
	w, err := n.Join(t.Context(), "ch", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	w.Leave()
	if _, err := n.Join(context.Background(), "ch", ""); !errors.Is(err, notify.ErrClosed) {
		t.Fatalf("Join after Close: got %v, want ErrClosed", err)
	}
}

// awaitPending waits until w has a wake-up pending, and leaves it pending.
func awaitPending(t *testing.T, w *notify.Waiter) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a bound for a hung test, not a timing assertion
	for len(w.Wake()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no wake-up arrived")
		}
		runtime.Gosched()
	}
}

func TestGrantGoesToItsOwner(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		n := notify.New(port.GoRedis(b.Client), nil)
		defer n.Close()
		a, err := n.Join(ctx, "ch", "ticket-a")
		if err != nil {
			t.Fatal(err)
		}
		defer a.Leave()
		bw, err := n.Join(ctx, "ch", "ticket-b")
		if err != nil {
			t.Fatal(err)
		}
		defer bw.Leave()
		// A grant for a ticket nobody holds wakes nobody; the one for
		// ticket-b (the second in line) wakes that waiter alone.
		for _, msg := range []string{"ticket-gone 7 1 2 3", "ticket-b 8 123 45 6"} {
			if err := b.Client.Publish(ctx, "ch", msg).Err(); err != nil {
				t.Fatal(err)
			}
		}
		<-bw.Wake()
		if g, ok := bw.Grant(); !ok || g != "ticket-b 8 123 45 6" {
			t.Fatalf("ticket-b's grant: got %q, %v", g, ok)
		}
		if g, ok := bw.Grant(); ok {
			t.Fatalf("a grant is taken once: got %q again", g)
		}
		select {
		case <-a.Wake():
			t.Fatal("a grant for another ticket woke ticket-a")
		default:
		}
		if g, ok := a.Grant(); ok {
			t.Fatalf("ticket-a got grant %q meant for another", g)
		}
	})
}

// TestNoGrantIsDropped: two grant messages for one waiter, both received
// before it looks (a forged one beside the real one, say), are each kept:
// Grant gives the oldest first, wakes the waiter again for the next, and
// Leave returns what it did not take, so that its Locker can release it.
func TestNoGrantIsDropped(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		n := notify.New(port.GoRedis(b.Client), nil)
		defer n.Close()
		a, err := n.Join(ctx, "ch", "ticket-a")
		if err != nil {
			t.Fatal(err)
		}
		defer a.Leave()
		bw, err := n.Join(ctx, "ch", "ticket-b")
		if err != nil {
			t.Fatal(err)
		}
		// In order on one connection: once a's arrives, both of b's have.
		for _, msg := range []string{"ticket-b 8 1 2", "ticket-b 9 1 3", "ticket-b 10 1 4", "ticket-a 7 1 5"} {
			if err := b.Client.Publish(ctx, "ch", msg).Err(); err != nil {
				t.Fatal(err)
			}
		}
		<-a.Wake()
		for _, want := range []string{"ticket-b 8 1 2", "ticket-b 9 1 3"} {
			<-bw.Wake()
			if g, ok := bw.Grant(); !ok || g != want {
				t.Fatalf("ticket-b's grant: got %q, %v, want %q, the oldest not taken", g, ok, want)
			}
		}
		if left := bw.Leave(); len(left) != 1 || left[0] != "ticket-b 10 1 4" {
			t.Fatalf("Leave: got %q, want the grant not taken", left)
		}
	})
}

// TestGrantChannelsStaySubscribed: a wake-up channel is unsubscribed when its
// last waiter leaves, so that releases stop coming back to this process; a
// grant channel (its waiters have tickets) stays subscribed until Close, so
// that the next wait pays no SUBSCRIBE round trip.
func TestGrantChannelsStaySubscribed(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	n := notify.New(port.GoRedis(b.Client), nil)
	defer n.Close()
	subscribers := func(channel string) int64 {
		t.Helper()
		counts, err := b.Client.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return counts[channel]
	}
	for _, tc := range []struct {
		channel, ticket string
		kept            bool
	}{{"grants", "ticket", true}, {"wake", "", false}} {
		w, err := n.Join(ctx, tc.channel, tc.ticket)
		if err != nil {
			t.Fatal(err)
		}
		if got := subscribers(tc.channel); got != 1 {
			t.Fatalf("%s while waiting: got %d subscribers, want 1", tc.channel, got)
		}
		w.Leave()
		want := int64(0)
		if tc.kept {
			want = 1
		}
		if got := settled(subscribers, tc.channel, want); got != want {
			t.Fatalf("%s after its last waiter left: got %d subscribers, want %d", tc.channel, got, want)
		}
	}
	// The wake channel's UNSUBSCRIBE went out on the same connection after
	// any the grant channel's leaving would have sent: it was not sent.
	if got := subscribers("grants"); got != 1 {
		t.Fatalf("grants once wake is unsubscribed: got %d subscribers, want 1", got)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if got := settled(subscribers, "grants", 0); got != 0 {
		t.Fatalf("grants after Close: got %d subscribers, want 0", got)
	}
}

// settled polls count(channel) until it is want, or ten seconds have passed
// (a bound for a hang: the server sees an UNSUBSCRIBE or a closed connection
// a moment after the client sends it), and returns the last count.
func settled(count func(string) int64, channel string, want int64) int64 {
	got := count(channel)
	for deadline := time.Now().Add(10 * time.Second); got != want && time.Now().Before(deadline); got = count(channel) {
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// TestJoinRacingClose: a Join whose SUBSCRIBE is under way when Close is
// called returns (subscribed, or ErrClosed) and starts no receive loop that
// Close does not wait for: run under -race, which reports a loop counted
// after Close began waiting. Many rounds, since the race is one of timing.
func TestJoinRacingClose(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		for i := range 200 {
			n := notify.New(port.GoRedis(b.Client), nil)
			joined := make(chan error, 1)
			go func() {
				w, err := n.Join(t.Context(), "ch", "id")
				if err == nil {
					w.Leave()
				}
				joined <- err
			}()
			if i%2 == 1 {
				runtime.Gosched()
			}
			if err := n.Close(); err != nil {
				t.Fatalf("round %d: Close: %v", i, err)
			}
			if err := <-joined; err != nil && !errors.Is(err, notify.ErrClosed) {
				t.Fatalf("round %d: Join: got %v, want nil or ErrClosed", i, err)
			}
		}
	})
}
