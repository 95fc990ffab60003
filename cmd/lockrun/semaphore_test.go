package main

import (
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// TestSemaphoreRuns: with -n 2, two runs of one NAME run at once, a third
// is skipped (75), a fourth waits with -wait and runs once a permit is
// released; -status shows the holders and the waiter, never an owner id; a
// run with another -n is refused while permits are held.
func TestSemaphoreRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	args := []string{"-n", "2", "pool", "--", "sh", "-c", blockingScript}
	holders := []*proc{h.start(nil, args...), h.start(nil, args...)}
	await(t, "two runs", func() bool { return h.lines("runs") == 2 })

	r := h.run("-n", "2", "pool", "--", "touch", "ran")
	wantCode(t, r, exitNotObtained)
	if want := `all 2 permits of semaphore "pool" are held`; !strings.Contains(r.stderr, want) {
		t.Errorf("a third run: stderr %q, want it to say %q", r.stderr, want)
	}
	r = h.run("-n", "3", "pool", "--", "touch", "ran")
	wantCode(t, r, exitUsage)
	for _, want := range []string{"-n 3", "limit 2", "same -n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("a run with -n 3: stderr %q, want it to say %q", r.stderr, want)
		}
	}

	waiter := h.start(nil, append([]string{"-wait", "30s"}, args...)...)
	queue := scripts.QueueKey(scripts.PermitsKey(lease.DefaultPrefix, "pool"))
	await(t, "the waiter queued", func() bool { return h.client.ZCard(ctx, queue).Val() == 1 })
	r = h.run("-n", "2", "-status", "pool")
	wantCode(t, r, 0)
	for _, want := range []string{"semaphore: pool\n", "key: leasekit:{pool}:permits\n", "limit: 2\n", "held: 2\n", "waiting: 1\n", "waiter: queued "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("-status: got %q, want it to contain %q", r.stdout, want)
		}
	}
	if n := strings.Count(r.stdout, "holder: ttl "); n != 2 {
		t.Errorf("-status: got %q, want a holder line for each permit", r.stdout)
	}
	// Without -n, -status and -break find the semaphore rather than call
	// the name free.
	r = h.run("-status", "pool")
	wantCode(t, r, 0)
	for _, want := range []string{"pool is a semaphore, not a lock (2 permits held)", "limit: 2\n", "held: 2\n"} {
		if !strings.Contains(r.stdout, want) || strings.Contains(r.stdout, "held: no") {
			t.Errorf("-status without -n: got %q, want it to contain %q and never say held: no", r.stdout, want)
		}
	}
	r = h.run("-break", "pool")
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "pool is a semaphore, not a lock (2 permits held)") {
		t.Errorf("-break of a semaphore: stderr %q, want it to say the name is a semaphore's", r.stderr)
	}
	// The permits' owners: the members scored at or above 0 (the header
	// is below).
	owners := h.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: scripts.PermitsKey(lease.DefaultPrefix, "pool"), ByScore: true, Start: "0", Stop: "+inf"}).Val()
	for _, owner := range owners {
		if strings.Contains(r.stdout+r.stderr, owner[:8]) {
			t.Errorf("-status shows an owner id:\n%s%s", r.stdout, r.stderr)
		}
	}

	h.touch("release")
	for _, p := range append(holders, waiter) {
		wantCode(t, p.wait(t), 0)
	}
	h.wantRuns(3)
	r = h.run("-n", "3", "-status", "pool")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "held: 0\n") || !strings.Contains(r.stdout, "limit: - (no permit held; -n 3 takes effect)") {
		t.Errorf("-status once every permit is released: got %q", r.stdout)
	}
	t.Cleanup(func() { h.wantNoFile("ran") })
}

// TestSemaphoreLostPermitStopsTheCommand: a permit lost while the command
// runs stops it, and lockrun exits 74, as for a lock.
func TestSemaphoreLostPermitStopsTheCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.start(nil, "-n", "3", "-ttl", "1s", "-grace", "200ms", "lost", "--", "sh", "-c", `touch started; while :; do sleep 0.02; done`)
	h.waitFile("started")
	if err := h.client.Del(t.Context(), scripts.PermitsKey(lease.DefaultPrefix, "lost")).Err(); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	wantCode(t, r, exitLost)
	if want := `a permit of semaphore "lost" was lost`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr: got %q, want it to say %q", r.stderr, want)
	}
}

func TestSemaphoreUsage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"zero", []string{"-n", "0", "f", "--", "true"}, "-n 0: a semaphore has at least 1 permit"},
		{"negative", []string{"-n", "-2", "f", "--", "true"}, "-n -2"},
		{"not a number", []string{"-n", "two", "f", "--", "true"}, "-n"},
		{"with once", []string{"-n", "2", "-once", "1m", "f", "--", "true"}, "-once cannot be combined with -n"},
		{"with fenced", []string{"-n", "2", "-fenced", "f", "--", "true"}, "-n cannot be combined with -fenced"},
		{"status with zero", []string{"-n", "0", "-status", "f"}, "-n 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := h.with(t).run(tc.args...)
			wantCode(t, r, exitUsage)
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr: got %q, want it to contain %q", r.stderr, tc.stderr)
			}
		})
	}
}

// await waits until cond holds, failing the test after hang: a bound for a
// hung test, not a timing assertion.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hang); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, hang)
		}
	}
}

// TestSemaphoreStatusReportsForeignKeys: -n -status on a semaphore whose
// keys hold what leasekit does not write says so, and exits 65.
func TestSemaphoreStatusReportsForeignKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	permits := scripts.PermitsKey(lease.DefaultPrefix, "odd")
	h.put(permits, "a string")
	if err := h.client.ZAdd(t.Context(), scripts.PermitsKey(lease.DefaultPrefix, "odd2"), redis.Z{Score: -1, Member: "four"}).Err(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"odd": "not a sorted set", "odd2": "not a semaphore's header"} {
		r := h.run("-n", "2", "-status", name)
		wantCode(t, r, exitDataErr)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("%s: stderr %q, want it to say %q", name, r.stderr, want)
		}
	}
}
