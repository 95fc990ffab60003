package processes_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// breakTTL is the lease of the frozen holder: far longer than the test
// waits for a waiter served at once.
const breakTTL = time.Minute

// frozenChild takes the lock in LEASEKIT_FROZEN ("addr kind name") for
// breakTTL and prints "holding TOKEN"; then, for each "write" line on
// stdin, writes its token to a Register (correctness) and prints the
// outcome: "wrote", or "refused" for a stale token.
func frozenChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_FROZEN"))
	addr, kind, name := f[0], f[1], f[2]
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	ctx := context.Background()
	l := newLocker(kind, client, &ownerLog{})
	defer l.Close()
	g, err := l.Acquire(ctx, name, breakTTL)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("holding", g.Token())
	reg := correctness.NewRegister(client)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch err := reg.Write(ctx, name+"-resource", g.Token(), []byte("frozen")); {
		case errors.Is(err, correctness.ErrStaleToken):
			fmt.Println("refused")
		case err != nil:
			fmt.Println("error", err)
		default:
			fmt.Println("wrote")
		}
	}
	return 0
}

// TestBreakAFrozenHolder: a holder process frozen (SIGSTOP) with a minute
// left on its lease is broken: the waiter queued behind it gets the lock
// at once, not at the ttl; with a correctness lock, the waiter writes with
// its newer token, and the resumed holder's write is refused.
func TestBreakAFrozenHolder(t *testing.T) {
	b := redistest.Real(t)
	for _, kind := range []string{"efficiency", "correctness"} {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			name := "frozen-" + kind
			holder := proc.Start(t, "frozen", "LEASEKIT_FROZEN="+b.Server.Addr+" "+kind+" "+name)
			if l := holder.Line(30 * time.Second); !strings.HasPrefix(l, "holding ") {
				t.Fatalf("holder: got %q", l)
			}
			holder.Stop()
			count := redistest.Count(b.Client)
			waiter := newLocker(kind, b.Client, &ownerLog{})
			defer waiter.Close()
			got := make(chan error, 1)
			var g grant
			go func() {
				wctx, cancel := context.WithTimeout(ctx, breakTTL/2)
				defer cancel()
				var err error
				g, err = waiter.Acquire(wctx, name, time.Minute)
				got <- err
			}()
			count.Await(t, "wait", 1)
			operator := correctness.New(b.Client, correctness.WithAudit(false))
			defer operator.Close()
			if broken, err := operator.Break(ctx, name); err != nil || !broken {
				t.Fatalf("Break: got %v, %v, want broken", broken, err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiter after the break: %v, want the lock at once, within half the frozen holder's ttl", err)
			}
			defer g.Release(ctx)
			if kind != "correctness" {
				return
			}
			if err := correctness.NewRegister(b.Client).Write(ctx, name+"-resource", g.Token(), []byte("new")); err != nil {
				t.Fatal(err)
			}
			holder.Continue()
			holder.Send("write")
			if l := holder.Line(30 * time.Second); l != "refused" {
				t.Fatalf("the resumed holder's write: got %q, want refused", l)
			}
		})
	}
}

// TestInspectCountsLiveWaiterProcesses: Inspect's Waiters is the number of
// live waiter processes queued, also after some of them were killed -9
// (their entries stay queued until a release drops them).
func TestInspectCountsLiveWaiterProcesses(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	const name = "inspected-procs"
	l := correctness.New(b.Client, correctness.WithAudit(false))
	defer l.Close()
	held, err := l.TryAcquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	env := fmt.Sprintf("LEASEKIT_LINE=%s correctness %s", b.Server.Addr, name)
	var waiters []*proc.Child
	for i := range 4 {
		w := proc.Start(t, "line", env)
		w.Send("go")
		awaitQueue(t, b.Client, lockKey(name)+":queue", int64(i+1))
		waiters = append(waiters, w)
	}
	if info, err := l.Inspect(ctx, name); err != nil || info.Waiters != 4 {
		t.Fatalf("four waiter processes: got %+v, %v, want 4 waiters", info, err)
	}
	waiters[1].Kill()
	waiters[3].Kill()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Redis notices a killed client's closed connection at once, but
		// asynchronously.
		info, err := l.Inspect(ctx, name)
		if err == nil && info.Waiters == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two of the four killed -9: got %+v, %v, want 2 waiters", info, err)
		}
	}
	if n := b.Client.ZCard(ctx, lockKey(name)+":queue").Val(); n != 4 {
		t.Fatalf("queue: %d entries, want the killed ones still there (Inspect changes nothing)", n)
	}
}
