package efficiency_test

import (
	"context"
	"errors"
	"io"
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

// permitsKey is the key of the permits of the semaphore called name.
func permitsKey(name string) string { return scripts.PermitsKey(lease.DefaultPrefix, name) }

func TestSemaphoreBadInput(t *testing.T) {
	b := redistest.Mini(t)
	l := newLocker(t, b)
	ctx := t.Context()
	noop := func(context.Context) error { return nil }
	cases := []struct {
		name  string
		sem   string
		limit int
		ttl   time.Duration
		want  error
		says  string
	}{
		{"zero limit", "s", 0, time.Second, efficiency.ErrInvalidLimit, "0 is below 1"},
		{"negative limit", "s", -3, time.Second, efficiency.ErrInvalidLimit, "-3 is below 1"},
		{"empty name", "", 2, time.Second, efficiency.ErrInvalidKey, "empty"},
		{"hash tag breaker", "}x", 2, time.Second, efficiency.ErrInvalidKey, "starts with '}'"},
		{"zero ttl", "s", 2, 0, efficiency.ErrInvalidTTL, "shorter than"},
		{"negative ttl", "s", 2, -time.Second, efficiency.ErrInvalidTTL, "shorter than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := l.Semaphore(tc.sem, tc.limit)
			ops := map[string]func() error{
				"TryAcquire": func() error { _, err := s.TryAcquire(ctx, tc.ttl); return err },
				"Acquire":    func() error { _, err := s.Acquire(ctx, tc.ttl); return err },
				"Do":         func() error { return s.Do(ctx, tc.ttl, noop) },
			}
			for op, call := range ops {
				if err := call(); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s: got %v, want %v saying %q", op, err, tc.want, tc.says)
				}
			}
		})
	}
	err := l.Semaphore("s", 2).Do(ctx, time.Second, nil)
	if err == nil || !strings.Contains(err.Error(), "fn is nil") {
		t.Fatalf("Do with a nil fn: got %v, want an error saying fn is nil", err)
	}
	if keys := b.Mini.Keys(); len(keys) != 0 {
		t.Fatalf("bad input left keys behind: %v", keys)
	}
}

// TestSemaphoreErrorsNameTheCorruptKey: a semaphore's queue or permits key
// that holds another type fails the acquire with an error that names that
// key.
func TestSemaphoreErrorsNameTheCorruptKey(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		for _, key := range []string{scripts.QueueKey(permitsKey("corrupt")), permitsKey("corrupt")} {
			b.Client.Del(t.Context(), scripts.QueueKey(permitsKey("corrupt")), permitsKey("corrupt"))
			b.Client.RPush(t.Context(), key, "x")
			holder, err := l.Semaphore("corrupt", 1).TryAcquire(t.Context(), time.Minute)
			if err == nil {
				// The permits are read at every acquire; the queue only
				// when waiting: wait for a permit to meet it.
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				_, err = l.Semaphore("corrupt", 1).Acquire(ctx, time.Minute)
				cancel()
				_ = holder.Release(t.Context())
			}
			if err == nil || !strings.Contains(err.Error(), "key "+lease.Quote(key)) || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("with %s a list: got %v, want an error that names it and says WRONGTYPE", key, err)
			}
		}
	})
}

// TestSemaphoreLimit: of 16 concurrent TryAcquires of a semaphore of 3,
// exactly 3 win; the next is refused, saying why; a release lets one in.
func TestSemaphoreLimit(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newLocker(t, b).Semaphore("three", 3)
		var mu sync.Mutex
		var held []*efficiency.Lock
		wins := redistest.Race(t, 16, efficiency.ErrNotObtained, func() error {
			lock, err := s.TryAcquire(ctx, time.Minute)
			if err == nil {
				mu.Lock()
				held = append(held, lock)
				mu.Unlock()
			}
			return err
		})
		if wins != 3 {
			t.Fatalf("got %d winners, want 3", wins)
		}
		_, err := s.TryAcquire(ctx, time.Minute)
		if !errors.Is(err, efficiency.ErrNotObtained) || !strings.Contains(err.Error(), `semaphore "three": all 3 permits are held`) {
			t.Fatalf("a fourth TryAcquire: got %v, want ErrNotObtained saying all 3 permits are held", err)
		}
		if err := held[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TryAcquire(ctx, time.Minute); err != nil {
			t.Fatalf("TryAcquire after a release: %v", err)
		}
	})
}

// TestSemaphoreNeverMoreThanLimit: 8 workers take a permit of a semaphore
// of 3 again and again; the server never holds more than 3 live permits,
// checked by each worker as soon as its Acquire returns, and the workers
// never count more than 3 of themselves inside.
func TestSemaphoreNeverMoreThanLimit(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		const workers, cycles, limit = 8, 60, 3
		var inside, most atomic.Int32
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				s := l.Semaphore("crowd", limit)
				for range cycles {
					lock, err := s.Acquire(ctx, 10*time.Second)
					if err != nil {
						errs <- err
						return
					}
					now := inside.Add(1)
					for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
					}
					// Permits are scored by their expiry; the header, below 0.
					if n := b.Client.ZCount(ctx, permitsKey("crowd"), "0", "+inf").Val(); n > limit {
						errs <- errors.New("the server holds more permits than the limit")
					}
					inside.Add(-1)
					if err := lock.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := most.Load(); got > limit {
			t.Fatalf("got %d holders at once, want at most %d", got, limit)
		}
	})
}

// TestSemaphoreHandsOverInArrivalOrder: with every permit held, waiters
// queue; each release hands its permit to the first, and no waiter makes a
// round trip to get it.
func TestSemaphoreHandsOverInArrivalOrder(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		s := newLocker(t, b).Semaphore("fifo", 2)
		var releases []func(context.Context) error
		for range 2 {
			lock, err := s.TryAcquire(ctx, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			releases = append(releases, lock.Release)
		}
		const waiters = 5
		type grant struct {
			arrival int
			lock    *efficiency.Lock
		}
		acquired := make(chan grant, waiters)
		errs := make(chan error, waiters)
		for i := range waiters {
			go func() {
				lock, err := s.Acquire(ctx, time.Hour)
				if err != nil {
					errs <- err
					return
				}
				acquired <- grant{i, lock}
			}()
			count.Await(t, "sem_wait", i+1) // queued before the next one starts
		}
		for want := range waiters {
			release := releases[0]
			releases = releases[1:]
			if err := release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case g := <-acquired:
				if g.arrival != want {
					t.Fatalf("release %d went to waiter %d, want %d, the next in arrival order", want+1, g.arrival, want)
				}
				releases = append(releases, g.lock.Release)
			case err := <-errs:
				t.Fatal(err)
			}
		}
		for _, release := range releases {
			if err := release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := count.Of("sem_wait"); n != waiters {
			t.Fatalf("sem_wait round trips: got %d, want %d, one per waiter: a handoff costs none", n, waiters)
		}
	})
}

// TestSemaphoreLimitMismatch: while permits granted under one limit are
// live, an acquire with another fails, naming both; once none is live, the
// new limit is taken.
func TestSemaphoreLimitMismatch(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		two, four := l.Semaphore("pool", 2), l.Semaphore("pool", 4)
		lock, err := two.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		const says = `semaphore "pool" has permits live under limit 2, and this Semaphore's limit is 4`
		if _, err := four.TryAcquire(ctx, time.Minute); !errors.Is(err, efficiency.ErrLimitMismatch) || !strings.Contains(err.Error(), says) {
			t.Fatalf("TryAcquire with limit 4: got %v, want ErrLimitMismatch saying %q", err, says)
		}
		if _, err := two.TryAcquire(ctx, time.Minute); err != nil {
			t.Fatalf("a second permit under limit 2: %v", err)
		}
		// A waiter fails at its first attempt too, rather than wait.
		if _, err := four.Acquire(ctx, time.Minute); !errors.Is(err, efficiency.ErrLimitMismatch) {
			t.Fatalf("Acquire with limit 4: got %v, want ErrLimitMismatch", err)
		}
		_ = lock.Release(ctx)
		if _, err := four.TryAcquire(ctx, time.Minute); !errors.Is(err, efficiency.ErrLimitMismatch) {
			t.Fatalf("limit 4 with one permit of limit 2 still live: got %v, want ErrLimitMismatch", err)
		}
		b.Client.Del(ctx, permitsKey("pool")) // the last one, as if expired
		for range 4 {
			if _, err := four.TryAcquire(ctx, time.Minute); err != nil {
				t.Fatalf("limit 4 once no permit is live: %v", err)
			}
		}
		if _, err := two.TryAcquire(ctx, time.Minute); !errors.Is(err, efficiency.ErrLimitMismatch) {
			t.Fatalf("limit 2 while permits of limit 4 are live: got %v, want ErrLimitMismatch", err)
		}
	})
}

// TestSemaphoreWaiterHandedAnotherLimit: a waiter queued under one limit
// is handed a permit granted under another (the last permit of its limit
// expired on the server, and an acquire with another limit then served the
// queue). It releases that permit and fails with ErrLimitMismatch naming
// both limits, rather than hold it beside permits it does not count.
func TestSemaphoreWaiterHandedAnotherLimit(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		one, three := l.Semaphore("limits", 1), l.Semaphore("limits", 3)
		if _, err := one.TryAcquire(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		waited := obtainPermitInBackground(ctx, one) // nil: it got a permit
		permits, queue := permitsKey("limits"), scripts.QueueKey(permitsKey("limits"))
		for b.Client.ZCard(ctx, queue).Val() != 1 {
			time.Sleep(time.Millisecond)
		}
		// The holder's permit expires on the server, long before the
		// waiter's timer would fire.
		for _, owner := range b.Client.ZRange(ctx, permits, 0, -1).Val() {
			b.Client.ZAdd(ctx, permits, redis.Z{Score: 1, Member: owner})
		}
		if _, err := three.TryAcquire(ctx, time.Minute); err != nil {
			t.Fatalf("limit 3 once no permit is live: %v", err)
		}
		const says = `semaphore "limits" was handed a permit granted under limit 3, and this Semaphore's limit is 1`
		if err := <-waited; !errors.Is(err, efficiency.ErrLimitMismatch) || !strings.Contains(err.Error(), says) {
			t.Fatalf("the waiter of limit 1: got %v, want ErrLimitMismatch saying %q", err, says)
		}
		if n := b.Client.ZCount(ctx, permits, "2", "+inf").Val(); n != 1 {
			t.Fatalf("live permits: got %d, want 1, the limit-3 holder's (the waiter released what it was handed)", n)
		}
	})
}

// TestSemaphoreKeyDeleted: a semaphore's permits and their limit are one
// key: deleted by hand, both go (no permit can outlive its limit), the
// holders find their permits gone, and an acquire with another limit sets
// its own.
func TestSemaphoreKeyDeleted(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newLocker(t, b).Semaphore("deleted", 2)
		held, err := s.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		b.Client.Del(ctx, permitsKey("deleted"))
		if err := held.Refresh(ctx, time.Hour); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Fatalf("a permit after its key was deleted: got %v, want ErrNotHeld", err)
		}
		if _, err := newLocker(t, b).Semaphore("deleted", 5).TryAcquire(ctx, time.Minute); err != nil {
			t.Fatalf("limit 5 once the key of limit 2 was deleted: %v, want a permit", err)
		}
		if _, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, efficiency.ErrLimitMismatch) {
			t.Fatalf("limit 2 beside a permit of 5: got %v, want ErrLimitMismatch", err)
		}
	})
}

// TestPermitIsALock: a permit refreshes, reports its ttl, is held by Hold
// and released as a lock is, and says so once it is gone.
func TestPermitIsALock(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newLocker(t, b).Semaphore("permit", 2)
		lock, err := s.TryAcquire(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if lock.Key() != permitsKey("permit") {
			t.Fatalf("Key: got %q, want %q", lock.Key(), permitsKey("permit"))
		}
		if err := lock.Refresh(ctx, time.Hour); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if ttl, err := lock.TTL(ctx); err != nil || ttl <= time.Minute {
			t.Fatalf("TTL after a refresh to an hour: got %v, %v", ttl, err)
		}
		if d := time.Until(lock.Deadline()); d <= time.Minute || d > time.Hour {
			t.Fatalf("Deadline after the refresh: %v from now, want within (1m, 1h]", d)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		for op, call := range map[string]func() error{
			"Release": func() error { return lock.Release(ctx) },
			"Refresh": func() error { return lock.Refresh(ctx, time.Minute) },
			"TTL":     func() error { _, err := lock.TTL(ctx); return err },
		} {
			if err := call(); !errors.Is(err, efficiency.ErrNotHeld) || !strings.Contains(err.Error(), `semaphore "permit"`) {
				t.Errorf("%s after Release: got %v, want ErrNotHeld naming the semaphore", op, err)
			}
		}
		lock, err = s.TryAcquire(ctx, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Hold(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Hold: %v", err)
		}
		if n := b.Client.Exists(ctx, permitsKey("permit")).Val(); n != 0 {
			t.Fatal("Hold did not release the permit")
		}
	})
}

// TestSemaphoreDoCancelsOnLoss: Do cancels fn's context with ErrLockLost
// when its permit is taken away, and returns it.
func TestSemaphoreDoCancelsOnLoss(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newLocker(t, b).Semaphore("do", 2)
		cause := make(chan error, 1)
		err := s.Do(ctx, 300*time.Millisecond, func(ctx context.Context) error {
			if err := b.Client.Del(ctx, permitsKey("do")).Err(); err != nil {
				return err
			}
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		})
		if !errors.Is(err, efficiency.ErrLockLost) {
			t.Errorf("Do: got %v, want ErrLockLost", err)
		}
		if got := <-cause; !errors.Is(got, efficiency.ErrLockLost) {
			t.Errorf("fn's context cause: got %v, want ErrLockLost", got)
		}
		ran := false
		if err := s.Do(ctx, time.Minute, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
			t.Fatalf("Do: got %v, ran %v", err, ran)
		}
	})
}

// TestSemaphoreDeadHolder: a permit whose holder never releases it frees
// itself at its ttl, and a waiter learns of it by a timer set to that
// expiry: one attempt to queue, one when the timer fires.
func TestSemaphoreDeadHolder(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	count := redistest.Count(b.Client)
	s := newLocker(t, b).Semaphore("dead", 1)
	if _, err := s.TryAcquire(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	lock, err := s.Acquire(ctx, time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the holder's ttl: %v", err)
	}
	_ = lock.Release(ctx)
	// A second or two more would mean the waiter slept the 1 s recheck
	// rather than the permit's ttl.
	if n := count.Of("sem_wait"); n > 3 {
		t.Fatalf("the waiter made %d attempts, want 2 (queue, then at the permit's expiry)", n)
	}
}

// TestSemaphoreWaitersGiveUpAndClose: a waiter whose ctx ends leaves the
// queue, so no release hands it a permit; Close ends the others with
// ErrClosed.
func TestSemaphoreWaitersGiveUpAndClose(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b)
		s := l.Semaphore("leave", 1)
		holder, err := s.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		gaveUp := make(chan error, 1)
		go func() { _, err := s.Acquire(wctx, time.Minute); gaveUp <- err }()
		count.Await(t, "sem_wait", 1)
		cancel()
		if err := <-gaveUp; !errors.Is(err, efficiency.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want ErrNotObtained and Canceled", err)
		}
		queue := scripts.QueueKey(permitsKey("leave"))
		if n := b.Client.ZCard(ctx, queue).Val(); n != 0 {
			t.Fatalf("queue after the waiter gave up: %d entries, want 0", n)
		}
		closed := make(chan error, 2)
		for range 2 {
			go func() { _, err := s.Acquire(ctx, time.Minute); closed <- err }()
		}
		count.Await(t, "sem_wait", 3)
		_ = l.Close()
		for range 2 {
			if err := <-closed; !errors.Is(err, efficiency.ErrClosed) || !strings.Contains(err.Error(), `semaphore "leave"`) {
				t.Fatalf("a waiter when its Locker closed: got %v, want ErrClosed naming the semaphore", err)
			}
		}
		if _, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, efficiency.ErrClosed) {
			t.Fatalf("TryAcquire after Close: got %v, want ErrClosed", err)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("a permit held at Close is still released: %v", err)
		}
	})
}

// TestSemaphoreWokenByRelease: where waiters do not queue, a release wakes
// one, which takes the permit with its next attempt.
func TestSemaphoreWokenByRelease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		s := newWakeLocker(t, b).Semaphore("wake", 1)
		holder, err := s.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // the holder's hour would outlast it
			defer cancel()
			lock, err := s.Acquire(wctx, time.Minute)
			if err == nil {
				err = lock.Release(ctx)
			}
			got <- err
		}()
		count.Await(t, "sem_wait", 1)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if n := count.Of("sem_wait"); n != 2 {
			t.Fatalf("sem_wait round trips: got %d, want 2 (subscribed try, woken try)", n)
		}
	})
}

// failLeaving is a go-redis hook that fails, as a cut connection would,
// every release that takes a queue entry out (ARGV[3] not empty: a waiter
// leaving, or its Locker's sweep), and lets the other commands through.
type failLeaving struct{}

func (failLeaving) DialHook(next redis.DialHook) redis.DialHook { return next }

func (failLeaving) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// evalsha sha N key... ARGV[1] ARGV[2] ARGV[3] ..., or eval with
		// the script's source
		args := cmd.Args()
		script, _ := args[min(1, len(args)-1)].(string)
		release := script == scripts.SemRelease.Hash() || cmd.Name() == "eval" && redis.NewScript(script).Hash() == scripts.SemRelease.Hash()
		n, _ := args[min(2, len(args)-1)].(int)
		if at := 3 + n + 2; release && len(args) > at && args[at] != "" {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmd)
	}
}

func (failLeaving) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestSemaphoreStrayIsReleasedAtOnce: a waiter that gave up while Redis
// could not take its entry out of the queue is still handed a permit by
// the next release; its Locker releases that permit at once, and it goes on
// to the next waiter, rather than stay held for the stray's hour.
func TestSemaphoreStrayIsReleasedAtOnce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		holder, err := newLocker(t, b).Semaphore("stray", 1).TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		strayClient := redis.NewClient(b.Client.Options())
		t.Cleanup(func() { _ = strayClient.Close() })
		strayClient.AddHook(failLeaving{})
		strays := redistest.Count(strayClient)
		wctx, cancel := context.WithCancel(ctx)
		gaveUp := make(chan error, 1)
		stray := efficiency.New(strayClient)
		t.Cleanup(func() { _ = stray.Close() })
		go func() { _, err := stray.Semaphore("stray", 1).Acquire(wctx, time.Hour); gaveUp <- err }()
		strays.Await(t, "sem_wait", 1)
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("the stray: got %v, want Canceled", err)
		}
		queue := scripts.QueueKey(permitsKey("stray"))
		if n := b.Client.ZCard(ctx, queue).Val(); n != 1 {
			t.Fatalf("queue after the stray gave up: %d entries, want its entry left behind", n)
		}
		next := redistest.Count(b.Client)
		got := obtainPermitInBackground(ctx, newLocker(t, b).Semaphore("stray", 1))
		next.Await(t, "sem_wait", 1)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the waiter behind the stray: %v", err)
		}
	})
}

// obtainPermitInBackground acquires a permit of s for a minute in a
// goroutine, giving up after 30 seconds, and releases it. The channel
// receives the first error, or nil.
func obtainPermitInBackground(ctx context.Context, s *efficiency.Semaphore) <-chan error {
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		lock, err := s.Acquire(wctx, time.Minute)
		if err == nil {
			err = lock.Release(ctx)
		}
		got <- err
	}()
	return got
}
