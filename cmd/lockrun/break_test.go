package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
)

// TestBreak: -break ends a held lock's lease at once and exits 0, handing
// the lock to the waiter queued for it, whose run then goes ahead; a lock
// nobody holds exits 1; -break with -n, or with a command, is a usage
// error. -status counts the live waiters.
func TestBreak(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	holder := efficiency.New(h.client)
	defer holder.Close()
	if _, err := holder.TryObtain(ctx, "stuck", time.Hour); err != nil {
		t.Fatal(err)
	}
	waiting := h.start(nil, "-wait", "1h", "stuck", "--", "touch", "ran")
	for deadline := time.Now().Add(hang); ; time.Sleep(10 * time.Millisecond) {
		if r := h.run("-status", "stuck"); strings.Contains(r.stdout, "waiters: 1\n") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("-status never counted the waiting run: %q", r.stdout)
		}
	}
	r := h.run("-break", "stuck")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "broken") {
		t.Errorf("stdout: got %q, want it to say the lease was broken", r.stdout)
	}
	wantCode(t, waiting.wait(t), 0)
	h.waitFile("ran")
	wantCode(t, h.run("-break", "stuck"), exitNotBroken)
	wantCode(t, h.run("-n", "2", "-break", "stuck"), exitUsage)
	wantCode(t, h.run("-break", "stuck", "--", "true"), exitUsage)
	wantCode(t, h.run("-status", "stuck", "-break", "stuck"), exitUsage)
}

// TestBrokenHolderSaysItMayHaveBeenBroken: the holder whose lease -break
// ended stops its command at its next refresh (exit 74), saying the lease
// expired or was broken, not only that the key is gone.
func TestBrokenHolderSaysItMayHaveBeenBroken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	holder := h.start(nil, "-ttl", "3s", "broken", "--", "sh", "-c", blockingScript)
	h.waitFile("started")
	wantCode(t, h.run("-break", "broken"), 0)
	r := holder.wait(t)
	wantCode(t, r, exitLost)
	if !strings.Contains(r.stderr, "broke") {
		t.Errorf("the broken holder's stderr: %q, want it to say the lease may have been broken", r.stderr)
	}
}

// TestBreakFencedDeposesTheLeader: -fenced -break breaks an election's
// lock: its leader is deposed, and Leader says so.
func TestBreakFencedDeposesTheLeader(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	l := correctness.New(h.client, correctness.WithAudit(false))
	defer l.Close()
	lost := make(chan error, 1)
	led := make(chan struct{})
	go func() {
		lost <- l.Campaign(ctx, "elected", time.Minute, []byte("a"), func(ctx context.Context, _ uint64) error {
			close(led)
			<-ctx.Done()
			return nil
		})
	}()
	<-led
	r := h.run("-status", "elected")
	if !strings.Contains(r.stdout, "kind: election") || !strings.Contains(r.stdout, "held: yes") {
		t.Errorf("-status of an election's name: got %q, want kind: election, held: yes", r.stdout)
	}
	wantCode(t, h.run("-fenced", "-break", "elected"), 0)
	if _, err := l.Leader(ctx, "elected"); err == nil {
		t.Fatalf("Leader after -fenced -break: got a leader, want ErrNoLeader")
	}
	cancel()
	<-lost
}
