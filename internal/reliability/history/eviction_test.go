package history_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// TestAuditFlagsEviction checks that Audit reports every maxmemory-policy
// that can evict keys as a risk to leases and tokens, starting from a small
// server under allkeys-lru, and noeviction as OK.
func TestAuditFlagsEviction(t *testing.T) {
	ctx := t.Context()
	client := redistest.Start(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru").Client(t)
	locker := correctness.New(client, correctness.WithAudit(false))
	t.Cleanup(func() { _ = locker.Close() })
	tests := []struct {
		policy string // "" keeps the policy the server started with
		want   correctness.Status
	}{
		{"", correctness.StatusRisk},
		{"volatile-lru", correctness.StatusRisk},
		{"allkeys-lfu", correctness.StatusRisk},
		{"allkeys-random", correctness.StatusRisk},
		{"volatile-ttl", correctness.StatusRisk},
		{"noeviction", correctness.StatusOK},
	}
	for _, tt := range tests {
		name := tt.policy
		if name == "" {
			name = "allkeys-lru at start"
		}
		t.Run(name, func(t *testing.T) {
			if tt.policy != "" {
				if err := client.ConfigSet(ctx, "maxmemory-policy", tt.policy).Err(); err != nil {
					t.Fatalf("CONFIG SET maxmemory-policy %s: %v", tt.policy, err)
				}
			}
			f := finding(t, locker, "eviction")
			if f.Status != tt.want {
				t.Errorf("eviction finding: got %v (%s), want %v", f.Status, f.Detail, tt.want)
			}
		})
	}
}

func finding(t *testing.T, locker *correctness.Locker, check string) correctness.Finding {
	t.Helper()
	findings, err := locker.Audit(t.Context())
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	for _, f := range findings {
		if f.Check == check {
			return f
		}
	}
	t.Fatalf("Audit: got findings %v, want one for %q", findings, check)
	return correctness.Finding{}
}

// TestFullServerGrantsNothing fills a noeviction server until writes fail with
// OOM and checks that every way to take a lock, and a fenced write, then
// fails with an error that names the key and says OOM: no lease, no fn run,
// no "not obtained" (the lock is not held by anyone), no lock key or fence
// counter left behind. Once memory is freed the same calls succeed, which
// shows OOM was the reason.
func TestFullServerGrantsNothing(t *testing.T) {
	client := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction").Client(t)
	fill(t, client)
	corr := correctness.New(client, correctness.WithAudit(false))
	t.Cleanup(func() { _ = corr.Close() })
	eff := efficiency.New(client)
	t.Cleanup(func() { _ = eff.Close() })
	reg := correctness.NewRegister(client)
	const ttl = time.Minute
	// Each call reports whether it wrongly succeeded: a lease, a run of fn, an
	// accepted write.
	tests := []struct {
		name string
		call func(ctx context.Context, name string) (bool, error)
	}{
		{"correctness TryAcquire", func(ctx context.Context, name string) (bool, error) {
			l, err := corr.TryAcquire(ctx, name, ttl)
			return l != nil, err
		}},
		{"correctness Acquire", func(ctx context.Context, name string) (bool, error) {
			l, err := corr.Acquire(ctx, name, ttl)
			return l != nil, err
		}},
		{"correctness Do", func(ctx context.Context, name string) (bool, error) {
			ran := false
			err := corr.Do(ctx, name, ttl, func(context.Context, uint64) error { ran = true; return nil })
			return ran, err
		}},
		{"efficiency TryObtain", func(ctx context.Context, name string) (bool, error) {
			l, err := eff.TryObtain(ctx, name, ttl)
			return l != nil, err
		}},
		{"efficiency Obtain", func(ctx context.Context, name string) (bool, error) {
			l, err := eff.Obtain(ctx, name, ttl)
			return l != nil, err
		}},
		{"efficiency Do", func(ctx context.Context, name string) (bool, error) {
			ran := false
			err := eff.Do(ctx, name, ttl, func(context.Context) error { ran = true; return nil })
			return ran, err
		}},
		{"efficiency Once", func(ctx context.Context, name string) (bool, error) {
			fnRan := false
			ran, err := eff.Once(ctx, name, ttl, func(context.Context) error { fnRan = true; return nil })
			return ran || fnRan, err
		}},
		{"Register Write", func(ctx context.Context, name string) (bool, error) {
			err := reg.Write(ctx, name, 42, []byte("v"))
			return err == nil, err
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("full-%d", i)
			keys := []string{scripts.LockKey(lease.DefaultPrefix, name), scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, name)),
				scripts.RegisterKey(lease.DefaultPrefix, name)}
			// A waiting call must fail at once, not wait for its context:
			// nobody holds the lock.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			succeeded, err := tt.call(ctx, name)
			if succeeded || err == nil {
				t.Fatalf("on a full server: got success %v, error %v; want no success and an OOM error", succeeded, err)
			}
			t.Logf("%s: %v", tt.name, err)
			if msg := err.Error(); !strings.Contains(msg, "OOM") || !strings.Contains(msg, `"`+name+`"`) {
				t.Errorf("error: got %q, want it to say OOM and name the lock %q", msg, name)
			}
			if errors.Is(err, correctness.ErrNotObtained) || errors.Is(err, efficiency.ErrNotObtained) {
				t.Errorf("error: got %v, matching ErrNotObtained; want a Redis failure: nobody holds the lock", err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error: got %v; want a failure at once, not after waiting for ctx", err)
			}
			if n, err := client.Exists(t.Context(), keys...).Result(); err != nil || n != 0 {
				t.Errorf("EXISTS %v after the failed call: got %d, %v; want 0, nil", keys, n, err)
			}
		})
	}
	t.Run("after freeing memory", func(t *testing.T) {
		// SYNC: Valkey frees a FLUSHALL's memory in the background
		// (lazyfree-lazy-user-flush yes), so the calls below could still
		// find the server full.
		if err := client.Do(t.Context(), "FLUSHALL", "SYNC").Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
		for i, tt := range tests {
			if ok, err := tt.call(t.Context(), fmt.Sprintf("freed-%d", i)); !ok || err != nil {
				t.Errorf("%s: got success %v, error %v; want success", tt.name, ok, err)
			}
		}
	})
}

// fill writes 256 KiB values until the server refuses one with OOM, then
// sets maxmemory 1 MiB below what the server uses. At the limit, used memory
// moves by a few hundred bytes either way (the query buffer of a refused
// write counts, and is freed), so a small write can fit again; a MiB over the
// limit, every write is refused.
func fill(t *testing.T, client *redis.Client) {
	t.Helper()
	ctx := t.Context()
	value := strings.Repeat("x", 256<<10)
	for n := 0; ; n++ {
		err := client.Set(ctx, fmt.Sprintf("filler:%d", n), value, 0).Err()
		if err != nil && strings.Contains(err.Error(), "OOM") {
			break
		}
		if err != nil || n == 1000 {
			t.Fatalf("filling the server: SET %d: got %v, want success or an OOM error, and an OOM error before 1000", n, err)
		}
	}
	used := usedMemory(t, client)
	if err := client.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-1<<20, 10)).Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory: %v", err)
	}
	if err := client.Set(ctx, "probe", "1", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("SET of one byte on the filled server: got %v, want an OOM error", err)
	}
}

func usedMemory(t *testing.T, client *redis.Client) int64 {
	t.Helper()
	info, err := client.Info(t.Context(), "memory").Result()
	if err != nil {
		t.Fatalf("INFO memory: %v", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO memory: used_memory %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO memory: got no used_memory in %q", info)
	return 0
}
