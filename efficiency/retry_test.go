package efficiency_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// TestScriptFlush: every operation works after the server's script cache
// was flushed, and reloads the script it runs with SCRIPT LOAD, not EVAL
// (a script EVAL loaded may be evicted since Redis 7.4).
func TestScriptFlush(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		sent := &commandNames{}
		b.Client.AddHook(sent)
		loads := 0
		flush := func() {
			t.Helper()
			names := sent.take()
			if slices.Contains(names, "eval") || slices.Contains(names, "evalsha") && !slices.Contains(names, "script") {
				t.Fatalf("after a flush the client sent %v; want the script loaded by SCRIPT LOAD, and no EVAL", names)
			}
			switch {
			case slices.Contains(names, "script"):
				loads++
			case len(names) > 0 && !slices.ContainsFunc(names, isPlain):
				t.Fatalf("after a flush the client sent %v: no script was loaded, and no plain command ran in its place", names)
			}
			if err := b.Client.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			sent.take()
		}
		flush()
		lock, err := l.TryObtain(ctx, "flush", time.Minute)
		if err != nil {
			t.Fatalf("TryObtain: %v", err)
		}
		flush()
		if err := lock.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		flush()
		if _, err := lock.TTL(ctx); err != nil {
			t.Fatalf("TTL: %v", err)
		}
		flush()
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		flush()
		if err := l.Do(ctx, "flush", time.Minute, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Do: %v", err)
		}
		flush()
		// Refresh, TTL, Release, and Do's release; where the server has
		// the plain commands, TTL alone.
		if want := 4 - plains(b); loads < want {
			t.Fatalf("%d of the operations after a flush ran a script, want %d", loads, want)
		}
	})
}

// isPlain reports whether name is a command of the plain path: SET (with
// IFEQ), DELEX or DELIFEQ.
func isPlain(name string) bool { return name == "set" || name == "delex" || name == "delifeq" }

// plains is how many of TestScriptFlush's operations the plain path serves
// on b's server: a refresh where SET takes IFEQ, and two releases where
// DELEX or DELIFEQ exists.
func plains(b *redistest.Backend) int {
	n := 0
	if b.Client.Do(context.Background(), "SET", "plains:probe", "v", "IFEQ", "v").Err() == redis.Nil {
		n++
	}
	if b.Client.Do(context.Background(), "DELEX", "plains:probe", "IFEQ", "v").Err() == nil ||
		b.Client.Do(context.Background(), "DELIFEQ", "plains:probe", "v").Err() == nil {
		n += 2
	}
	return n
}

// commandNames is a go-redis hook that records the name of every command
// the client sends, lowercase, pipelined ones included.
type commandNames struct {
	mu    sync.Mutex
	names []string
}

// take returns the names recorded since the last call.
func (h *commandNames) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := h.names
	h.names = nil
	return names
}

func (h *commandNames) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		h.names = append(h.names, strings.ToLower(c.Name()))
	}
}

func (h *commandNames) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *commandNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds...)
		return next(ctx, cmds)
	}
}

func TestRoundTrips(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		// Warm the script cache: the first call of each script after a flush
		// costs an extra EVAL.
		lock, err := l.TryObtain(ctx, "budget", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		count := redistest.Count(b.Client)
		lock, err = l.TryObtain(ctx, "budget", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count.Total(); n != 2 {
			t.Fatalf("uncontended TryObtain + Release: got %d round trips, want 2", n)
		}

		holder, err := l.TryObtain(ctx, "budget", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		count.Reset()
		done := make(chan error, 1)
		go func() {
			lock, err := l.Obtain(ctx, "budget", time.Minute)
			if err == nil {
				err = lock.Release(ctx)
			}
			done <- err
		}()
		count.Await(t, "wait", 1) // the waiter's probe, then its try once subscribed
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Handing the lock to the waiter: its probe, its try once subscribed
		// (which queues it, so no release slips between the two), and the
		// holder's release, which hands the lock over. Then the waiter's own
		// release, as in the uncontended case.
		// (A first EVALSHA of a script the server has not cached yet is
		// refused with NOSCRIPT, and the script loaded with SCRIPT LOAD and
		// sent again: once per server.)
		all := count.Total() - count.Of("noscript") - count.Of("script")
		if a, w, r := count.Of("acquire"), count.Of("wait"), count.Of("release"); a != 1 || w != 1 || r != 2 || all != 4 {
			t.Fatalf("handoff to one waiter: got %d acquire, %d wait, %d release, %d round trips in all; want 1, 1, 2, 4", a, w, r, all)
		}
	})
}

func TestResentAcquireIsGranted(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b, efficiency.WithOwnerSource(sameOwner{}))
		if _, err := l.TryObtain(ctx, "resent", time.Minute); err != nil {
			t.Fatal(err)
		}
		// The key now holds this owner id: a resent acquire must report the
		// grant, never ErrNotObtained.
		if _, err := l.TryObtain(ctx, "resent", time.Minute); err != nil {
			t.Fatalf("resent TryObtain: got %v, want the grant", err)
		}
		if _, err := l.Obtain(ctx, "resent", time.Minute); err != nil {
			t.Fatalf("resent Obtain: got %v, want the grant", err)
		}
		other := newLocker(t, b)
		if _, err := other.TryObtain(ctx, "resent", time.Minute); !errors.Is(err, efficiency.ErrNotObtained) {
			t.Fatalf("another owner: got %v, want ErrNotObtained", err)
		}
	})
}

func TestRecognisedGrantKeepsItsDeadline(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		first := newLocker(t, b, efficiency.WithOwnerSource(sameOwner{}))
		if _, err := first.TryObtain(ctx, "shared", 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		again := newLocker(t, b, efficiency.WithOwnerSource(sameOwner{}))
		for _, op := range []struct {
			name   string
			obtain func() (*efficiency.Lock, error)
		}{
			{"TryObtain", func() (*efficiency.Lock, error) { return again.TryObtain(ctx, "shared", time.Hour) }},
			{"Obtain", func() (*efficiency.Lock, error) { return again.Obtain(ctx, "shared", time.Hour) }},
		} {
			lock, err := op.obtain()
			if err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			left := time.Until(lock.Deadline())
			if pttl := b.Client.PTTL(ctx, "leasekit:{shared}").Val(); left > pttl {
				t.Errorf("%s: Deadline %v from now, want at most the key's remaining %v", op.name, left, pttl)
			}
		}
	})
}

func TestSpoiledAcquireLeavesNoGrant(t *testing.T) {
	cases := []struct {
		name  string
		fault redistest.Fault
		want  error // nil: any error
		// ttl: the lease asked for. After a lost reply, a minute: the
		// release of the unreported grant has min(ttl, 1s) to land, which
		// 20ms may not be on a loaded machine (and miniredis's clock
		// stands still, so the key stays), and on a real server the key
		// must not pass the check by expiring. A late reply must come
		// after the ttl.
		ttl time.Duration
	}{
		{"lost reply", redistest.Fault{Err: io.ErrUnexpectedEOF}, io.ErrUnexpectedEOF, time.Minute},
		{"reply after the deadline", redistest.Fault{After: func() { time.Sleep(60 * time.Millisecond) }}, efficiency.ErrLateGrant, 20 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				l := newLocker(t, b)
				fault := tc.fault
				fault.Match = func(op string) bool { return op == "acquire" || op == "wait" }
				redistest.Inject(b.Client, &fault)
				for _, op := range []struct {
					name string
					call func() error
				}{
					{"TryObtain", func() error { _, err := l.TryObtain(t.Context(), "spoiled", tc.ttl); return err }},
					{"Obtain", func() error {
						// A late grant is released and Obtain tries again,
						// until three in a row were late; a lost reply is
						// retried until ctx ends.
						ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
						if tc.want == efficiency.ErrLateGrant {
							ctx, cancel = context.WithCancel(t.Context())
						}
						defer cancel()
						_, err := l.Obtain(ctx, "spoiled", tc.ttl)
						return err
					}},
				} {
					if err := op.call(); !errors.Is(err, tc.want) {
						t.Errorf("%s: got %v, want %v", op.name, err, tc.want)
					}
					// Redis granted it; the caller was not told, so nobody
					// may be left waiting out that grant.
					if n := b.Client.Exists(t.Context(), "leasekit:{spoiled}").Val(); n != 0 {
						t.Errorf("%s: the unreported grant is still in Redis", op.name)
					}
				}
			})
		})
	}
}

func TestQueuedWaiterWithALostReplyLeavesNoEntry(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		holder, err := newLocker(t, b).TryObtain(ctx, "lost", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// Loaded first, so that the spoiled reply is the script's own and
		// not the NOSCRIPT that would stop it from running.
		if err := redistest.Script(scripts.Wait).Load(ctx, b.Client).Err(); err != nil {
			t.Fatal(err)
		}
		// The waiter gives up (its context ends) as its second try's reply
		// is lost: it tried again after the first.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		tries := 0
		redistest.Inject(b.Client, &redistest.Fault{Match: func(op string) bool {
			if op != "wait" {
				return false
			}
			if tries++; tries == 2 {
				cancel()
			}
			return true
		}, Err: io.ErrUnexpectedEOF})
		_, err = newLocker(t, b).Obtain(wctx, "lost", time.Minute)
		if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, efficiency.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Obtain: got %v, want the lost reply's error, ErrNotObtained and the context's end", err)
		}
		queue := scripts.QueueKey(scripts.LockKey(lease.DefaultPrefix, "lost"))
		if n := b.Client.ZCard(ctx, queue).Val(); n != 0 {
			t.Fatalf("queue: got %d entries, want the failed waiter's gone", n)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.Client.Exists(ctx, "leasekit:{lost}").Val(); n != 0 {
			t.Fatal("the release handed the lock to the waiter that had failed")
		}
	})
}

func TestWakeUpPassesOnWhenTheWokenWaiterFails(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newWakeLocker(t, b)
		holder, err := l.TryObtain(ctx, "pass", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The wait round trip after each waiter's try once subscribed is the
		// first waiter's woken retry (counted by count, which, unlike the
		// calls here, leaves out an EVALSHA the server answered NOSCRIPT):
		// it fails before reaching Redis (so nothing is granted and nothing
		// released), and that waiter gives up (its context ends as it fails).
		firstCtx, giveUp := context.WithCancel(ctx)
		defer giveUp()
		var fired atomic.Bool
		redistest.Inject(b.Client, &redistest.Fault{
			Match: func(op string) bool {
				if op == "wait" && count.Of("wait") == 2 && !fired.Swap(true) {
					giveUp()
					return true
				}
				return false
			},
			Err:  io.ErrUnexpectedEOF,
			Drop: true,
		})
		first := make(chan error, 1)
		go func() {
			_, err := l.Obtain(firstCtx, "pass", time.Minute)
			first <- err
		}()
		count.Await(t, "wait", 1) // the first waiter's try once subscribed
		second := make(chan error, 1)
		go func() {
			// The holder's hour outlasts this: only a passed-on wake-up
			// ends the wait in time.
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			lock, err := l.Obtain(wctx, "pass", time.Minute)
			if err == nil {
				err = lock.Release(ctx)
			}
			second <- err
		}()
		count.Await(t, "wait", 2)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-first; !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, context.Canceled) {
			t.Fatalf("first waiter: got %v, want the lost reply and its context's end", err)
		}
		if err := <-second; err != nil {
			t.Fatalf("second waiter: %v: the wake-up the first could not use was lost", err)
		}
	})
}
