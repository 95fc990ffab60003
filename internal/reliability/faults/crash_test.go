package faults_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// holdTTL is the lease the holder keeps through the crash: long enough that
// a restart fits well inside it.
const holdTTL = 3 * time.Second

// TestCrashRestart SIGKILLs the lock server while a holder keeps a lease with
// Do and workers take turns on another lock, and restarts it on the same port
// and dir. Without persistence the server forgets both locks and the token
// counters; with AOF and appendfsync always it forgets nothing it
// acknowledged. Either way, tokens go up in real-time order across the crash
// (the clock floor covers the lost counter) and the Register, which lives on
// another server, accepts no write from a holder who was superseded. The
// held lease is kept with AOF and reported lost through Do's context without.
func TestCrashRestart(t *testing.T) {
	modes := []struct {
		name  string
		args  []string
		keeps bool // the restarted server still holds acknowledged leases
	}{
		{"no-persistence", nil, false},
		{"aof-always", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			crashRestart(t, m.args, m.keeps)
		})
	}
}

func crashRestart(t *testing.T, args []string, keeps bool) {
	ctx := t.Context()
	srv := redistest.Start(t, args...)
	resource := redistest.Start(t) // never crashes: the fence outlives the lock server
	locks := newCorrectness(t, srv.Client(t))
	reg := correctness.NewRegister(resource.Client(t))

	h := startHolder(ctx, locks, reg)
	var tokenA uint64
	select {
	case tokenA = <-h.token:
	case r := <-h.result:
		t.Fatalf("the holder ended before the crash: %v", r.err)
	}
	w := startWorkers(ctx, locks, reg, 4)
	defer w.stop()
	if !waitFor(10*time.Second, func() bool { return w.grantCount() >= 20 }) {
		t.Fatalf("got %d worker grants before the crash, want 20", w.grantCount())
	}

	srv.Kill()
	killed := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	restarted := time.Now()
	close(h.restarted)
	t.Logf("server down for %v", restarted.Sub(killed))

	// B wants the holder's lock.
	leaseB, err := locks.TryAcquire(ctx, "held", time.Minute)
	if keeps {
		if !errors.Is(err, correctness.ErrNotObtained) {
			t.Fatalf("TryAcquire of the lease held through an AOF restart: got %v, want ErrNotObtained", err)
		}
		if err := reg.Write(ctx, "held", tokenA, []byte("A after the restart")); err != nil {
			t.Fatalf("write by the holder, still the newest, after the restart: got %v, want nil", err)
		}
		r := <-h.result
		if r.cause != nil || r.err != nil {
			t.Fatalf("Do through an AOF restart: fn's context ended with %v and Do returned %v, want the lease kept and nil", r.cause, r.err)
		}
		if leaseB, err = locks.TryAcquire(ctx, "held", time.Minute); err != nil {
			t.Fatalf("TryAcquire after the holder released: %v", err)
		}
	} else if err != nil {
		t.Fatalf("TryAcquire after a restart that lost the lock: got %v, want a grant", err)
	}
	if leaseB.Token() <= tokenA {
		t.Fatalf("got token %d after the restart, want more than %d from before it", leaseB.Token(), tokenA)
	}
	if err := reg.Write(ctx, "held", leaseB.Token(), []byte("B")); err != nil {
		t.Fatalf("write by the new holder: %v", err)
	}
	var stale *correctness.StaleTokenError
	if err := reg.Write(ctx, "held", tokenA, []byte("A, superseded")); !errors.As(err, &stale) || stale.Highest != leaseB.Token() {
		t.Fatalf("write by the superseded holder: got %v, want a *StaleTokenError with Highest %d", err, leaseB.Token())
	}
	if !keeps {
		r := <-h.result
		if !errors.Is(r.cause, correctness.ErrLockLost) || !errors.Is(r.err, correctness.ErrLockLost) {
			t.Fatalf("Do across a restart that lost the lease: fn's context cause %v, Do returned %v, want both ErrLockLost", r.cause, r.err)
		}
	}

	if !waitFor(10*time.Second, func() bool { return w.grantsSince(restarted) >= 20 }) {
		t.Fatalf("got %d worker grants after the restart, want 20", w.grantsSince(restarted))
	}
	w.stop()
	w.check(t)
}

// holder keeps the lock "held" with Do through the crash.
type holder struct {
	token     chan uint64   // the holder's token, once its first write is in
	restarted chan struct{} // closed by the test after the restart
	result    chan holderResult
}

type holderResult struct {
	cause error // fn's context cause, nil if it was not cancelled
	err   error // Do's error
}

// startHolder runs Do on "held". fn writes to the Register, reports its
// token, and after the restart watches its context for 1.5 ttl: with the
// lease kept, refreshes must carry it past its first deadline.
func startHolder(ctx context.Context, locks *correctness.Locker, reg *correctness.Register) *holder {
	h := &holder{token: make(chan uint64, 1), restarted: make(chan struct{}), result: make(chan holderResult, 1)}
	go func() {
		var cause error
		err := locks.Do(ctx, "held", holdTTL, func(ctx context.Context, token uint64) error {
			if err := reg.Write(ctx, "held", token, []byte("A")); err != nil {
				return err
			}
			h.token <- token
			select {
			case <-h.restarted:
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return nil
			}
			watch := time.NewTimer(holdTTL * 3 / 2)
			defer watch.Stop()
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
			case <-watch.C:
			}
			return nil
		})
		h.result <- holderResult{cause: cause, err: err}
	}()
	return h
}

// workers take turns on the lock "busy" with TryAcquire, write their token to
// the Register, and release, recording what they were granted and what the
// Register accepted.
type workers struct {
	halt chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	errs chan error
	n    atomic.Int64

	mu       sync.Mutex
	grants   []span
	accepted []span
}

func startWorkers(ctx context.Context, locks *correctness.Locker, reg *correctness.Register, n int) *workers {
	w := &workers{halt: make(chan struct{}), errs: make(chan error, n)}
	for i := range n {
		w.wg.Go(func() { w.run(ctx, locks, reg, fmt.Sprintf("worker %d", i)) })
	}
	return w
}

func (w *workers) run(ctx context.Context, locks *correctness.Locker, reg *correctness.Register, name string) {
	for {
		select {
		case <-w.halt:
			return
		case <-ctx.Done():
			return
		default:
		}
		start := time.Now()
		l, err := locks.TryAcquire(ctx, "busy", time.Second)
		end := time.Now()
		if err != nil { // held by another worker, or the server is down
			time.Sleep(time.Millisecond)
			continue
		}
		w.add(&w.grants, span{token: l.Token(), start: start, end: end})
		w.n.Add(1)
		start = time.Now()
		err = reg.Write(ctx, "busy", l.Token(), []byte(name))
		end = time.Now()
		switch {
		case err == nil:
			w.add(&w.accepted, span{token: l.Token(), start: start, end: end})
		case !errors.Is(err, correctness.ErrStaleToken):
			w.errs <- fmt.Errorf("%s: Register write (the resource server never crashes): %w", name, err)
			return
		}
		_ = l.Release(ctx) // fails while the server is down; the lease then expires
	}
}

func (w *workers) add(to *[]span, s span) {
	w.mu.Lock()
	*to = append(*to, s)
	w.mu.Unlock()
}

func (w *workers) grantCount() int64 { return w.n.Load() }

func (w *workers) grantsSince(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, g := range w.grants {
		if g.start.After(t) {
			n++
		}
	}
	return n
}

func (w *workers) stop() {
	w.once.Do(func() { close(w.halt) })
	w.wg.Wait()
}

// check asserts that the grants' tokens are unique and rise in real-time
// order, across the crash too, and that no accepted write followed one with a
// higher token.
func (w *workers) check(t *testing.T) {
	t.Helper()
	close(w.errs)
	for err := range w.errs {
		t.Error(err)
	}
	seen := make(map[uint64]bool, len(w.grants))
	for _, g := range w.grants {
		if seen[g.token] {
			t.Fatalf("token %d was granted twice", g.token)
		}
		seen[g.token] = true
	}
	if a, b, found := outOfOrder(w.grants, true); found {
		t.Fatalf("a grant that started %v after another ended got token %d, want more than %d", b.start.Sub(a.end), b.token, a.token)
	}
	if a, b, found := outOfOrder(w.accepted, false); found {
		t.Fatalf("the Register accepted token %d %v after it accepted %d: a stale write", b.token, b.start.Sub(a.end), a.token)
	}
	t.Logf("%d grants, %d writes accepted", len(w.grants), len(w.accepted))
}
