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
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// The child of TestPausedHolderSeesItsLossAtOnce holds for ttl, and is frozen
// for pausedFor: long enough that its lease's deadline has passed whatever
// the last refresh before the freeze was. A look at fn's context after a gap
// of at least resumedGap is the first after the freeze.
const (
	pausedTTL  = time.Second
	pausedFor  = 2500 * time.Millisecond
	resumedGap = 2 * time.Second
)

// holdChild holds the lock, or leads the election, called name, in a loop:
// each time, fn looks at its context every 100 µs until the first look after
// the parent froze and resumed the process, and prints what that look saw.
// Then it waits for a line on stdin before it holds again.
func holdChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_HOLD"))
	addr, kind, name := f[0], f[1], f[2]
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	ctx := context.Background()
	stdin := bufio.NewReader(os.Stdin)
	var hold func() error
	switch kind {
	case "efficiency":
		l := efficiency.New(client)
		defer l.Close()
		hold = func() error {
			lock, err := l.Obtain(ctx, name, pausedTTL)
			if err != nil {
				return err
			}
			return lock.Hold(ctx, func(ctx context.Context) error {
				return watch(ctx, lock.Deadline, efficiency.ErrLockLost)
			})
		}
	case "correctness":
		l := correctness.New(client, correctness.WithAudit(false))
		defer l.Close()
		hold = func() error {
			lease, err := l.Acquire(ctx, name, pausedTTL)
			if err != nil {
				return err
			}
			return lease.Hold(ctx, func(ctx context.Context, _ uint64) error {
				return watch(ctx, lease.Deadline, correctness.ErrLockLost)
			})
		}
	case "campaign":
		l := correctness.New(client, correctness.WithAudit(false))
		defer l.Close()
		hold = func() error {
			return l.Campaign(ctx, name, pausedTTL, nil, func(ctx context.Context, _ uint64) error {
				return watch(ctx, nil, correctness.ErrLockLost)
			})
		}
	}
	for {
		fmt.Println("ended", hold())
		if _, err := stdin.ReadString('\n'); err != nil {
			return 0
		}
	}
}

// watch looks at ctx until it ends, and prints what the first look after the
// freeze saw: whether ctx was still alive, whether its cause was lost, and,
// where the lease's deadline is known, whether it had passed. A ctx that
// ends before the freeze (a refresh late on a loaded machine) is printed as
// such.
func watch(ctx context.Context, deadline func() time.Time, lost error) error {
	fmt.Println("holding")
	last := time.Now()
	for {
		now := time.Now()
		err := ctx.Err()
		if now.Sub(last) >= resumedGap {
			past := deadline == nil || !now.Before(deadline())
			fmt.Printf("resumed alive=%v lost=%v past=%v\n", err == nil, errors.Is(context.Cause(ctx), lost), past)
			return nil
		}
		if err != nil {
			fmt.Println("early", context.Cause(ctx))
			return nil
		}
		last = now
		time.Sleep(100 * time.Microsecond)
	}
}

// TestPausedHolderSeesItsLossAtOnce: a holder process frozen past its
// lease's deadline (SIGSTOP, as a long GC or a VM migration would) must find
// fn's context cancelled, with a LockLost cause, on its very first look after
// it resumes. The keeper goroutine's timer fires late after a freeze, and fn
// can run before it: before the fix, 7 of 12 resumed leaders still saw their
// context alive, and gocron ran a deposed leader's job. For efficiency and
// correctness holds and for a campaign's leader.
func TestPausedHolderSeesItsLossAtOnce(t *testing.T) {
	for _, kind := range []string{"efficiency", "correctness", "campaign"} {
		t.Run(kind, func(t *testing.T) { testPausedHolder(t, kind) })
	}
}

func testPausedHolder(t *testing.T, kind string) {
	b := redistest.Real(t)
	const rounds, tries = 3, 10
	child := proc.Start(t, "hold", fmt.Sprintf("LEASEKIT_HOLD=%s %s paused-holder", b.Server.Addr, kind))
	done := 0
	for try := 0; done < rounds && try < tries; try++ {
		if try > 0 {
			child.Send("again")
		}
		if got := child.Line(30 * time.Second); got != "holding" {
			t.Fatalf("child: got %q, want holding", got)
		}
		time.Sleep(50 * time.Millisecond)
		child.Stop()
		time.Sleep(pausedFor)
		child.Continue()
		got := child.Line(30 * time.Second)
		if strings.HasPrefix(got, "early ") {
			t.Logf("the lease was lost before the freeze, on a loaded machine: %s", got)
		} else if got != "resumed alive=false lost=true past=true" {
			t.Fatalf("the first look at fn's context after a freeze past the deadline: got %q, want alive=false lost=true past=true", got)
		} else {
			done++
		}
		if got := child.Line(30 * time.Second); !strings.HasPrefix(got, "ended ") {
			t.Fatalf("child: got %q, want the hold's end", got)
		}
	}
	if done < rounds {
		t.Fatalf("only %d of %d tries froze a live hold", done, tries)
	}
}
