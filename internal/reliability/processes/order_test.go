package processes_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/cron/gocronlock"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// orderTTL is the lease of the line's holders: short, so that a trial
// waits little for a dead holder's lease to lapse; a live holder keeps it
// with its refreshes.
const orderTTL = 400 * time.Millisecond

// lineChild takes its turn in a line of processes on one lock, as many
// times as it is told: each "go" line on stdin makes it wait for the lock
// (Obtain, Acquire, Campaign, or a gocron Elector's leadership), and once
// it has it, it takes the next number of the line's counter, prints "got
// N", and lets the lock go (the holder of a trial never does: it is killed
// or frozen). "hold" makes it take the lock, print "holding", and keep it.
func lineChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_LINE"))
	addr, kind, name := f[0], f[1], f[2]
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	ctx := context.Background()
	owners := &ownerLog{}
	var l locker
	var c *correctness.Locker
	switch kind {
	case "efficiency", "correctness":
		l = newLocker(kind, client, owners)
		defer l.Close()
	default:
		c = correctness.New(client, correctness.WithAudit(false))
		defer c.Close()
	}
	counter := name + ":order"
	stdin := bufio.NewScanner(os.Stdin)
	for stdin.Scan() {
		hold := stdin.Text() == "hold"
		turn := func() error {
			if hold {
				fmt.Println("holding")
				select {} // until killed or frozen
			}
			n, err := client.Incr(ctx, counter).Result()
			fmt.Println("got", n, err)
			return nil
		}
		var err error
		switch kind {
		case "efficiency", "correctness":
			var g grant
			if g, err = l.Acquire(ctx, name, orderTTL); err == nil {
				_ = turn()
				err = g.Release(ctx)
			}
		case "campaign":
			err = c.Campaign(ctx, name, orderTTL, nil, func(context.Context, uint64) error { return turn() })
		case "elector":
			err = elect(c, name, turn)
		}
		if err != nil {
			fmt.Println("error", err)
		}
	}
	return 0
}

// elect runs turn once a gocron Elector of the election called name leads,
// and closes the Elector, handing leadership over.
func elect(c *correctness.Locker, name string, turn func() error) error {
	e, err := gocronlock.NewElector(c, name, gocronlock.WithElectorTTL(orderTTL))
	if err != nil {
		return err
	}
	defer e.Close()
	for e.Term() == 0 {
		time.Sleep(time.Millisecond)
	}
	return turn()
}

// TestQueueOrderAfterHolderDies: three waiter processes queue one after
// another behind a holder process, which is then killed with -9, or frozen
// with SIGSTOP past its ttl. Whichever waiter's timer fires first, the lock
// goes to the first in line, as a release would hand it, and then to the
// others in their order: the same rule for efficiency and correctness locks,
// elections and the gocron Elector. Ten trials of each, every one in order.
func TestQueueOrderAfterHolderDies(t *testing.T) {
	b := redistest.Real(t)
	for _, kind := range []string{"efficiency", "correctness", "campaign", "elector"} {
		t.Run(kind, func(t *testing.T) {
			name := "order-" + kind
			env := fmt.Sprintf("LEASEKIT_LINE=%s %s %s", b.Server.Addr, kind, name)
			line := make([]*proc.Child, 3)
			for i := range line {
				line[i] = proc.Start(t, "line", env)
			}
			inOrder, void := 0, 0
			var got []string
			for trial := 0; trial < 20; {
				stop := trial%2 == 1
				order, ok := orderTrial(t, b, env, name, line, stop)
				if !ok {
					if void++; void > 5 {
						t.Fatalf("%d trials in a row found the holder's lease lapsed before the line formed", void)
					}
					continue
				}
				trial++
				got = append(got, order)
				if order == "W1 W2 W3" {
					inOrder++
				}
			}
			if inOrder != 20 {
				t.Fatalf("%d of 20 trials handed the lock over in queue order after its holder died (kill -9, SIGSTOP in turn): %v", inOrder, got)
			}
		})
	}
}

// orderTrial runs one trial: a new holder process takes the lock, the line
// queues behind it in order, and the holder is frozen (stop) or killed. It
// returns the order in which the line got the lock, as "W1 W2 W3", and
// true; or false when the holder's lease lapsed before the line formed (a
// loaded machine starved its refreshes of a short ttl, and a waiter took
// the free lock): no trial.
func orderTrial(t *testing.T, b *redistest.Backend, env, name string, line []*proc.Child, stop bool) (string, bool) {
	t.Helper()
	ctx := t.Context()
	b.Client.Del(ctx, name+":order")
	holder := proc.Start(t, "line", env)
	holder.Send("hold")
	if l := holder.Line(30 * time.Second); l != "holding" {
		t.Fatalf("holder: got %q, want holding", l)
	}
	queue := lockKey(name) + ":queue"
	for i, w := range line {
		w.Send("go")
		if l, ok := queued(t, b.Client, queue, int64(i+1), w); !ok {
			t.Logf("W%d: %q before it queued: the holder's lease lapsed; the trial is void", i+1, l)
			for _, ahead := range line[:i] {
				ahead.Line(30 * time.Second) // its turn, once the lapse is found
			}
			holder.Kill()
			return "", false
		}
	}
	if stop {
		holder.Stop()
	} else {
		holder.Kill()
	}
	turns := make([]string, 3)
	for i, w := range line {
		l := w.Line(30 * time.Second)
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(l, "got "), " <nil>"))
		if err != nil || n < 1 || n > 3 {
			t.Fatalf("W%d: got %q, want its turn", i+1, l)
		}
		turns[n-1] = fmt.Sprint("W", i+1)
	}
	holder.Kill()
	return strings.Join(turns, " "), true
}

// queued waits until queue has n entries, and reports true; or, if w prints
// a line first (it took the lock, or failed), returns the line and false.
func queued(t *testing.T, c redis.UniversalClient, queue string, n int64, w *proc.Child) (string, bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); c.ZCard(t.Context(), queue).Val() != n; {
		select {
		case l := <-w.Lines():
			return l, false
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d entries in %s", n, queue)
		}
	}
	return "", true
}
