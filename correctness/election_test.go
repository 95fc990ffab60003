package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// electionWait bounds every wait of the election tests: a bound for a hung
// test, far above any handoff or recheck, not a timing assertion.
const electionWait = 30 * time.Second

// candidate is a Campaign running in a goroutine: it reports its term when
// it takes office, and leads until resign is closed or its term is lost.
type candidate struct {
	value  string
	led    chan uint64   // its term, once in office
	resign chan struct{} // closed: fn returns
	lost   chan error    // fn's context's cause, when it ended before resign
	done   chan error    // Campaign's error
}

// campaign starts a candidate with value on l.
func campaign(ctx context.Context, l *correctness.Locker, name string, ttl time.Duration, value string) *candidate {
	c := &candidate{value: value, led: make(chan uint64, 1), resign: make(chan struct{}), lost: make(chan error, 1), done: make(chan error, 1)}
	go func() {
		c.done <- l.Campaign(ctx, name, ttl, []byte(value), func(ctx context.Context, term uint64) error {
			c.led <- term
			select {
			case <-c.resign:
				return nil
			case <-ctx.Done():
				c.lost <- context.Cause(ctx)
				return ctx.Err()
			}
		})
	}()
	return c
}

// term waits for the candidate to take office and returns its term.
func (c *candidate) term(t *testing.T) uint64 {
	t.Helper()
	select {
	case term := <-c.led:
		return term
	case err := <-c.done:
		t.Fatalf("candidate %s: Campaign ended before it led: %v", c.value, err)
	case <-time.After(electionWait):
		t.Fatalf("candidate %s did not lead within %v", c.value, electionWait)
	}
	return 0
}

// end makes the candidate resign and returns Campaign's error.
func (c *candidate) end(t *testing.T) error {
	t.Helper()
	close(c.resign)
	return c.result(t)
}

// result waits for Campaign to return.
func (c *candidate) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(electionWait):
		t.Fatalf("candidate %s: Campaign did not return within %v", c.value, electionWait)
	}
	return nil
}

// next waits for the observer's next Leader.
func next(t *testing.T, seen <-chan correctness.Leader) correctness.Leader {
	t.Helper()
	select {
	case v, ok := <-seen:
		if !ok {
			t.Fatal("the observer's channel closed")
		}
		return v
	case <-time.After(electionWait):
		t.Fatalf("the observer saw no change within %v", electionWait)
	}
	return correctness.Leader{}
}

func show(v correctness.Leader) string {
	if v.Term == 0 && v.Value == nil {
		return "none"
	}
	return fmt.Sprintf("%q@%d", v.Value, v.Term)
}

// TestCampaignInArrivalOrder: candidates lead in the order they began to
// wait, each with a term above the last, and each takes over from the one
// before by a handoff: when a leader resigns, its successor makes no round
// trip to learn of it.
func TestCampaignInArrivalOrder(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		first := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "fifo", time.Minute, "c0")
		last := first.term(t)
		cs := []*candidate{first}
		for i := 1; i <= 4; i++ {
			// A Locker each, as processes would have.
			cs = append(cs, campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "fifo", time.Minute, fmt.Sprintf("c%d", i)))
			count.Await(t, "wait", i) // queued
		}
		for i := 1; i < len(cs); i++ {
			tries := count.Of("wait")
			if err := cs[i-1].end(t); err != nil {
				t.Fatalf("%s resigned: Campaign returned %v, want nil", cs[i-1].value, err)
			}
			term := cs[i].term(t)
			if term <= last {
				t.Fatalf("%s leads with term %d, want above %d", cs[i].value, term, last)
			}
			last = term
			for j := i + 1; j < len(cs); j++ {
				select {
				case <-cs[j].led:
					t.Fatalf("%s led before %s, which arrived first", cs[j].value, cs[i].value)
				default:
				}
			}
			if n := count.Of("wait"); n != tries {
				t.Fatalf("%s made %d wait round trips to take over, want 0: it was not handed the lock", cs[i].value, n-tries)
			}
		}
		if err := cs[len(cs)-1].end(t); err != nil {
			t.Fatal(err)
		}
	})
}

// TestResignHandsOver: a leader that returns hands leadership to the next
// candidate at once, Leader reports each in turn, and Campaign returns fn's
// error.
func TestResignHandsOver(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b, correctness.WithAudit(false))
		a := campaign(ctx, l, "handover", time.Minute, "a")
		termA := a.term(t)
		if got, err := l.Leader(ctx, "handover"); err != nil || string(got.Value) != "a" || got.Term != termA {
			t.Fatalf("Leader while a leads: got %s, %v, want \"a\"@%d", show(got), err, termA)
		}
		next := newLocker(t, b, correctness.WithAudit(false))
		bye := errors.New("bye")
		done := make(chan error, 1)
		led := make(chan uint64) // fn returns only once the test has its term
		go func() {
			done <- next.Campaign(ctx, "handover", time.Minute, []byte("b"), func(ctx context.Context, term uint64) error {
				led <- term
				return bye
			})
		}()
		count.Await(t, "wait", 1)
		if err := a.end(t); err != nil {
			t.Fatalf("a: got %v, want nil", err)
		}
		select {
		case termB := <-led:
			if termB <= termA {
				t.Fatalf("b's term %d, want above a's %d", termB, termA)
			}
		case err := <-done:
			t.Fatalf("b: %v", err)
		case <-time.After(electionWait):
			t.Fatal("b did not lead")
		}
		if err := <-done; err != bye {
			t.Fatalf("b's Campaign: got %v, want fn's error", err)
		}
		if _, err := l.Leader(ctx, "handover"); !errors.Is(err, correctness.ErrNoLeader) {
			t.Fatalf("Leader after the last resigned: got %v, want ErrNoLeader", err)
		}
	})
}

// TestLeaderNoLeader: Leader reports ErrNoLeader when nobody holds the lock,
// when its holder has not taken office (a plain Acquire of the name), and
// when the leader key outlived the lease it was written for; and the leader
// when there is one, its value up to MaxLeaderValue bytes intact.
func TestLeaderNoLeader(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b, correctness.WithAudit(false))
		noLeader := func(when string) {
			t.Helper()
			if got, err := l.Leader(ctx, "office"); !errors.Is(err, correctness.ErrNoLeader) || got.Term != 0 || got.Value != nil {
				t.Fatalf("Leader %s: got %s, %v, want the zero Leader and ErrNoLeader", when, show(got), err)
			}
		}
		noLeader("before any campaign")
		plain, err := l.TryAcquire(ctx, "office", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		noLeader("while a plain lease holds the lock")
		if err := plain.Release(ctx); err != nil {
			t.Fatal(err)
		}

		big := strings.Repeat("v", correctness.MaxLeaderValue)
		c := campaign(ctx, l, "office", time.Minute, big)
		term := c.term(t)
		got, err := l.Leader(ctx, "office")
		if err != nil || string(got.Value) != big || got.Term != term {
			t.Fatalf("Leader: got a %d-byte value @%d, %v, want the %d-byte value @%d", len(got.Value), got.Term, err, len(big), term)
		}
		// The lock vanishes (as when a dead leader's lease expires) and
		// another owner takes it: the leader key it leaves names nobody.
		lockKey := plain.Key()
		if err := b.Client.Del(ctx, lockKey).Err(); err != nil {
			t.Fatal(err)
		}
		noLeader("once the leader's lock is gone")
		other, err := l.TryAcquire(ctx, "office", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		noLeader("while another grant holds the lock beside the old leader key")
		if err := c.end(t); !errors.Is(err, correctness.ErrLockLost) {
			t.Fatalf("the deposed leader's Campaign: got %v, want ErrLockLost", err)
		}
		if err := other.Release(ctx); err != nil {
			t.Fatal(err)
		}
		noLeader("after the last holder released")
	})
}

// TestDeposedLeaderIsCancelled: a leader whose lock is taken loses its term:
// fn's context ends with ErrLockLost, and so does Campaign.
func TestDeposedLeaderIsCancelled(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b, correctness.WithAudit(false))
		c := campaign(ctx, l, "deposed", 3*time.Second, "a")
		term := c.term(t)
		lockKey := scripts.LockKey(lease.DefaultPrefix, "deposed")
		if err := b.Client.Set(ctx, lockKey, "usurper:"+fmt.Sprint(term+1), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case cause := <-c.lost:
			if !errors.Is(cause, correctness.ErrLockLost) {
				t.Fatalf("fn's context ended with %v, want ErrLockLost", cause)
			}
		case <-time.After(electionWait):
			t.Fatal("the deposed leader's fn was not cancelled")
		}
		if err := c.result(t); !errors.Is(err, correctness.ErrLockLost) {
			t.Fatalf("Campaign: got %v, want ErrLockLost", err)
		}
		if v := b.Client.Get(ctx, lockKey).Val(); v != "usurper:"+fmt.Sprint(term+1) {
			t.Fatalf("the deposed leader's resignation changed the lock to %q", v)
		}
	})
}

// TestCandidateLateToOfficeLosesItsTerm: a candidate whose lease passes its
// deadline while it takes office (the reply to its announcement came late)
// gets ErrLockLost, as for a lease lost in office, without fn having run; it
// releases the lock and leaves no leader behind.
func TestCandidateLateToOfficeLosesItsTerm(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		const value = "late-candidate"
		client := redis.NewClient(&redis.Options{Addr: b.Client.Options().Addr})
		t.Cleanup(func() { _ = client.Close() })
		client.AddHook(lateReply{carrying: value, by: 200 * time.Millisecond})
		l := correctness.New(client, correctness.WithLogger(quiet), correctness.WithAudit(false))
		t.Cleanup(func() { _ = l.Close() })
		ran := false
		err := l.Campaign(ctx, "late", 50*time.Millisecond, []byte(value), func(context.Context, uint64) error {
			ran = true
			return nil
		})
		if !errors.Is(err, correctness.ErrLockLost) || ran {
			t.Fatalf("Campaign: got %v with fn run: %v, want ErrLockLost and fn not run", err, ran)
		}
		if n := b.Client.Exists(ctx, scripts.LockKey(lease.DefaultPrefix, "late")).Val(); n != 0 {
			t.Fatal("the late candidate left its lock held")
		}
		if _, err := l.Leader(ctx, "late"); !errors.Is(err, correctness.ErrNoLeader) {
			t.Fatalf("Leader: got %v, want ErrNoLeader", err)
		}
	})
}

// lateReply is a go-redis hook that delays, by by, every successful reply
// to a command with a []byte argument equal to carrying (not a NOSCRIPT,
// which go-redis follows with an EVAL).
type lateReply struct {
	carrying string
	by       time.Duration
}

func (lateReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h lateReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		for _, arg := range cmd.Args() {
			if b, ok := arg.([]byte); ok && string(b) == h.carrying && err == nil {
				time.Sleep(h.by)
			}
		}
		return err
	}
}

func (lateReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestPanickingLeaderResigns: a leader whose fn panics hands leadership to
// the next candidate, and the panic goes on up the stack.
func TestPanickingLeaderResigns(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b, correctness.WithAudit(false))
		queued := make(chan *candidate, 1)
		recovered := func() (r any) {
			defer func() { r = recover() }()
			_ = l.Campaign(ctx, "panics", time.Minute, []byte("a"), func(context.Context, uint64) error {
				queued <- campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "panics", time.Minute, "b")
				count.Await(t, "wait", 1)
				panic("boom")
			})
			return nil
		}()
		if recovered != "boom" {
			t.Fatalf("recovered %v, want the panic of fn", recovered)
		}
		next := <-queued
		term := next.term(t)
		if got, err := l.Leader(ctx, "panics"); err != nil || got.Term != term || string(got.Value) != "b" {
			t.Fatalf("Leader after the panic: got %s, %v, want \"b\"@%d", show(got), err, term)
		}
		if err := next.end(t); err != nil {
			t.Fatal(err)
		}
	})
}

// TestObserveEveryChange: an observer sees the leader at first (none), then
// each leader of a line of candidates that hand over one after another (each
// resigns once the observer has seen it), in term order with the term
// Campaign gave it, then none once the last resigned, and no more.
func TestObserveEveryChange(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		count := redistest.Count(b.Client)
		seen, err := newLocker(t, b, correctness.WithAudit(false)).Observe(ctx, "changes")
		if err != nil {
			t.Fatal(err)
		}
		if v := next(t, seen); v.Term != 0 || v.Value != nil {
			t.Fatalf("first: got %s, want none", show(v))
		}
		const n = 5
		line := make([]*candidate, n)
		for i := range line {
			line[i] = campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "changes", time.Minute, fmt.Sprint("c", i))
			if i == 0 {
				line[0].term(t)
			} else {
				count.Await(t, "wait", i)
			}
		}
		var got []string
		last := uint64(0)
		for i, c := range line {
			v := next(t, seen)
			got = append(got, show(v))
			term := v.Term
			if i > 0 {
				term = c.term(t)
			}
			if string(v.Value) != c.value || v.Term <= last || v.Term != term {
				t.Fatalf("change %d: got %s after %v, want %s with term %d, above %d", i+1, show(v), got[:i], c.value, term, last)
			}
			last = v.Term
			if err := c.end(t); err != nil {
				t.Fatalf("%s: %v", c.value, err)
			}
		}
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("after the last resigned: got %s, want none (seen so far %v)", show(v), got)
		}
		cancel()
		for v := range seen {
			t.Fatalf("after the line ended: got %s, want no more changes", show(v))
		}
	})
}

// TestLeaderKeyHealsAndExpires: the leader key expires with the leader's
// lease (a leader killed -9 leaves nothing forever); deleted while its
// leader is in office, it is written back by the leader's next refresh, so
// Leader and the observers are right again.
func TestLeaderKeyHealsAndExpires(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := newLocker(t, b, correctness.WithAudit(false))
		seen, err := l.Observe(ctx, "heals")
		if err != nil {
			t.Fatal(err)
		}
		next(t, seen) // none
		const ttl = 600 * time.Millisecond
		a := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "heals", ttl, "a")
		term := a.term(t)
		if v := next(t, seen); v.Term != term {
			t.Fatalf("got %s, want a@%d", show(v), term)
		}
		key := "leasekit:{heals}:leader"
		if left := b.Client.PTTL(ctx, key).Val(); left <= 0 || left > ttl {
			t.Fatalf("leader key ttl: %v, want the lease's, at most %v", left, ttl)
		}
		b.Client.Del(ctx, key)
		// A notice makes the observer read now: nobody leads.
		b.Client.Publish(ctx, key, "vacant 1")
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("after the leader key was deleted: got %s, want none", show(v))
		}
		// The next refresh, a third of the ttl later, writes it back.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got, err := l.Leader(ctx, "heals")
			if err == nil && got.Term == term && string(got.Value) == "a" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Leader after the leader key was deleted: got %s, %v; want a@%d again", show(got), err, term)
			}
		}
		if left := b.Client.PTTL(ctx, key).Val(); left <= 0 || left > ttl {
			t.Fatalf("leader key ttl once written back: %v, want the lease's, at most %v", left, ttl)
		}
		if v := next(t, seen); v.Term != term || string(v.Value) != "a" {
			t.Fatalf("once the leader key was written back: got %s, want a@%d again", show(v), term)
		}
		if err := a.end(t); err != nil {
			t.Fatal(err)
		}
		if n := b.Client.Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("the leader key is left after the leader resigned")
		}
	})
}

// TestObserveTrustsTheKeysNotTheNotices: a forged notice ("elected" with a
// huge term, "vacant" while a leader is in office) costs an observer a read
// and changes nothing it reports; the next real change is reported.
func TestObserveTrustsTheKeysNotTheNotices(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		seen, err := newLocker(t, b, correctness.WithAudit(false)).Observe(ctx, "forged")
		if err != nil {
			t.Fatal(err)
		}
		next(t, seen) // none
		a := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "forged", time.Minute, "a")
		term := a.term(t)
		if v := next(t, seen); string(v.Value) != "a" || v.Term != term {
			t.Fatalf("got %s, want a@%d", show(v), term)
		}
		channel := "leasekit:{forged}:leader"
		for _, msg := range []string{"elected 9999999999999999999 1000 evil", "vacant " + fmt.Sprint(term), "elected 1 5 x"} {
			if err := b.Client.Publish(ctx, channel, msg).Err(); err != nil {
				t.Fatal(err)
			}
		}
		count := redistest.Count(b.Client)
		bName := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "forged", time.Minute, "b")
		count.Await(t, "wait", 1)
		if err := a.end(t); err != nil {
			t.Fatal(err)
		}
		bTerm := bName.term(t)
		// A read between the handover and b's announcement finds nobody in
		// office: none may come first.
		v := next(t, seen)
		if v.Term == 0 {
			v = next(t, seen)
		}
		if string(v.Value) != "b" || v.Term != bTerm {
			t.Fatalf("after three forged notices and a real handover: got %s, want b@%d, the real next leader", show(v), bTerm)
		}
		if err := bName.end(t); err != nil {
			t.Fatal(err)
		}
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("after b resigned: got %s, want none", show(v))
		}
	})
}

// TestCampaignBadInput: bad input is an error that names what is wrong,
// before anything is acquired.
func TestCampaignBadInput(t *testing.T) {
	b := redistest.Mini(t)
	l := newLocker(t, b)
	ctx := t.Context()
	noop := func(context.Context, uint64) error { return nil }
	tooBig := make([]byte, correctness.MaxLeaderValue+1)
	cases := []struct {
		name string
		call func() error
		want error  // nil: no sentinel
		says string // in the message
	}{
		{"empty name", func() error { return l.Campaign(ctx, "", time.Second, nil, noop) }, correctness.ErrInvalidKey, "empty"},
		{"name starting with }", func() error { return l.Campaign(ctx, "}x", time.Second, nil, noop) }, correctness.ErrInvalidKey, "'}'"},
		{"zero ttl", func() error { return l.Campaign(ctx, "e", 0, nil, noop) }, correctness.ErrInvalidTTL, "0s"},
		{"negative ttl", func() error { return l.Campaign(ctx, "e", -time.Second, nil, noop) }, correctness.ErrInvalidTTL, "-1s"},
		{"nil fn", func() error { return l.Campaign(ctx, "e", time.Second, nil, nil) }, nil, "fn is nil"},
		{"value over 64 KiB", func() error { return l.Campaign(ctx, "e", time.Second, tooBig, noop) }, nil, "65537 bytes"},
		{"Leader empty name", func() error { _, err := l.Leader(ctx, ""); return err }, correctness.ErrInvalidKey, "empty"},
		{"Observe empty name", func() error { _, err := l.Observe(ctx, ""); return err }, correctness.ErrInvalidKey, "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error matching %v that says %q", err, tc.want, tc.says)
			}
		})
	}
	if n := b.Client.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("bad input left %d keys in Redis", n)
	}
}

// TestCampaignWaitEnds: a candidate whose ctx ends while it waits gets
// ErrNotObtained and ctx's error; one whose Locker is closed, ErrClosed; and
// Leader and Observe on a closed Locker fail with ErrClosed.
func TestCampaignWaitEnds(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		holder := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "ends", time.Minute, "a")
		holder.term(t)
		ran := func(context.Context, uint64) error { t.Error("fn ran without leadership"); return nil }
		l := newLocker(t, b, correctness.WithAudit(false))
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := l.Campaign(wctx, "ends", time.Minute, nil, ran)
		if !errors.Is(err, correctness.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Campaign past its deadline: got %v, want ErrNotObtained and DeadlineExceeded", err)
		}
		count := redistest.Count(b.Client)
		closed := make(chan error, 1)
		go func() { closed <- l.Campaign(ctx, "ends", time.Minute, nil, ran) }()
		count.Await(t, "wait", 1)
		_ = l.Close()
		if err := <-closed; !errors.Is(err, correctness.ErrClosed) {
			t.Fatalf("Campaign when its Locker closed: got %v, want ErrClosed", err)
		}
		if _, err := l.Leader(ctx, "ends"); !errors.Is(err, correctness.ErrClosed) {
			t.Fatalf("Leader after Close: got %v, want ErrClosed", err)
		}
		if _, err := l.Observe(ctx, "ends"); !errors.Is(err, correctness.ErrClosed) {
			t.Fatalf("Observe after Close: got %v, want ErrClosed", err)
		}
		if err := holder.end(t); err != nil {
			t.Fatal(err)
		}
	})
}

// TestObserveRedisDown: Observe fails with an error that names the election
// when it cannot subscribe.
func TestObserveRedisDown(t *testing.T) {
	b := redistest.Mini(t)
	client := redis.NewClient(&redis.Options{Addr: b.Mini.Addr(), MaxRetries: -1})
	l := correctness.New(client, correctness.WithLogger(quiet), correctness.WithAudit(false))
	defer l.Close()
	defer client.Close()
	b.Mini.Close()
	if _, err := l.Observe(t.Context(), "down"); err == nil || !strings.Contains(err.Error(), `"down"`) {
		t.Fatalf("Observe without Redis: got %v, want an error naming the election", err)
	}
}

// TestCloseEndsObserve: a Locker's Close ends the Observe calls under way,
// whose channels close.
func TestCloseEndsObserve(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := correctness.New(b.Client, correctness.WithAudit(false))
		changes, err := l.Observe(t.Context(), "closing")
		if err != nil {
			t.Fatal(err)
		}
		if got := <-changes; got.Term != 0 {
			t.Fatalf("first: got term %d, want the zero Leader", got.Term)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for range changes {
		}
		if _, err := l.Observe(t.Context(), "closing"); !errors.Is(err, correctness.ErrClosed) {
			t.Fatalf("Observe after Close: got %v, want ErrClosed", err)
		}
	})
}

// TestManyObserversShareOneConnection: a thousand Observe calls of one
// Locker ride its one subscription connection, and read the election once
// per change between them, not once each: the server sees a handful of
// connections more, not a thousand.
func TestManyObserversShareOneConnection(t *testing.T) {
	b := redistest.Real(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := redis.NewClient(&redis.Options{Addr: b.Server.Addr})
	defer client.Close()
	l := correctness.New(client, correctness.WithLogger(quiet), correctness.WithAudit(false))
	defer l.Close()
	clients := func() int { return strings.Count(b.Client.ClientList(ctx).Val(), "\n") }
	before := clients()
	const n = 1000
	seen := make([]<-chan correctness.Leader, n)
	for i := range seen {
		var err error
		if seen[i], err = l.Observe(ctx, "many"); err != nil {
			t.Fatal(err)
		}
		next(t, seen[i]) // none
	}
	a := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "many", time.Minute, "a")
	term := a.term(t)
	for i, s := range seen {
		if v := next(t, s); v.Term != term {
			t.Fatalf("observer %d: got %s, want a@%d", i, show(v), term)
		}
	}
	got := clients() - before
	t.Logf("%d observers: %d connections more", n, got)
	if got > 5 {
		t.Fatalf("%d observers opened %d connections, want a handful at most", n, got)
	}
	if err := a.end(t); err != nil {
		t.Fatal(err)
	}
}
