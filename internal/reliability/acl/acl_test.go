// Package acl checks that leasekit works under a Redis ACL user allowed only
// its keys, channels and commands, the user the README documents.
package acl_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// leastPrivilege is the README's ACL line, less the password.
const leastPrivilege = "ACL SETUSER leasekit on >PASSWORD resetkeys ~leasekit:* resetchannels &leasekit:* " +
	"-@all +set +get +del +pttl +pexpire +incr +time +hget +hset +hmget " +
	"+zadd +zrem +zpopmin +zscore +zrange +zcard +zcount +zremrangebyscore +persist +publish +pubsub|numsub +subscribe +unsubscribe +spublish +pubsub|shardnumsub +ssubscribe +sunsubscribe +ping +evalsha +eval +wait +config|get +info"

func TestREADMEDocumentsTheACL(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), leastPrivilege) {
		t.Fatalf("README.md does not contain the tested ACL line:\n%s", leastPrivilege)
	}
}

// user creates an ACL user from an ACL SETUSER line (password "pw") and
// returns a client logged in as it.
func user(t *testing.T, admin *redis.Client, line string) *redis.Client {
	t.Helper()
	args := []any{}
	for _, f := range strings.Fields(strings.Replace(line, ">PASSWORD", ">pw", 1)) {
		args = append(args, f)
	}
	if err := admin.Do(t.Context(), args...).Err(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	name := strings.Fields(line)[2]
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: name, Password: "pw"})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEveryOperationUnderLeastPrivilege(t *testing.T) {
	s := redistest.Start(t)
	c := user(t, s.Client(t), leastPrivilege)
	ctx := t.Context()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	el := efficiency.New(c)
	defer el.Close()
	lock, err := el.TryObtain(ctx, "job", time.Minute)
	must("TryObtain", err)
	must("Refresh", lock.Refresh(ctx, time.Minute))
	_, err = lock.TTL(ctx)
	must("TTL", err)
	count := redistest.Count(c)
	waited := make(chan error, 1)
	go func() {
		l, err := el.Obtain(ctx, "job", time.Minute) // woken by the release below
		if err == nil {
			err = l.Release(ctx)
		}
		waited <- err
	}()
	count.Await(t, "wait", 1) // queued, so the release hands over under this ACL
	must("Release", lock.Release(ctx))
	must("Obtain", <-waited)
	must("Do", el.Do(ctx, "job", time.Minute, func(context.Context) error { return nil }))
	_, err = el.Once(ctx, "cron", time.Minute, func(context.Context) error { return nil })
	must("Once", err)

	sem := el.Semaphore("pool", 1)
	permit, err := sem.TryAcquire(ctx, time.Minute)
	must("Semaphore.TryAcquire", err)
	must("permit Refresh", permit.Refresh(ctx, time.Minute))
	_, err = permit.TTL(ctx)
	must("permit TTL", err)
	queued := count.Of("sem_wait")
	go func() {
		p, err := sem.Acquire(ctx, time.Minute) // handed over by the release below
		if err == nil {
			err = p.Release(ctx)
		}
		waited <- err
	}()
	count.Await(t, "sem_wait", queued+1)
	must("permit Release", permit.Release(ctx))
	must("Semaphore.Acquire", <-waited)

	cl := correctness.New(c, correctness.WithReplicas(0, 0))
	defer cl.Close()
	lease, err := cl.TryAcquire(ctx, "account", time.Minute)
	must("TryAcquire", err)
	reg := correctness.NewRegister(c)
	must("Register.Write", reg.Write(ctx, "account", lease.Token(), []byte("v")))
	_, _, err = reg.Read(ctx, "account")
	must("Register.Read", err)
	must("Lease.Release", lease.Release(ctx))
	must("Do", cl.Do(ctx, "account", time.Minute, func(context.Context, uint64) error { return nil }))
	octx, stop := context.WithCancel(ctx)
	defer stop()
	leaders, err := cl.Observe(octx, "leader")
	must("Observe", err)
	// next takes what the observer reports; a failure here must not hang
	// the suite, so it gives up after a minute.
	next := func(want string) correctness.Leader {
		t.Helper()
		select {
		case v := <-leaders:
			return v
		case <-time.After(time.Minute):
			t.Fatalf("Observe under the ACL: nothing reported in a minute, want %s", want)
			return correctness.Leader{}
		}
	}
	if v := next("no leader yet"); v.Term != 0 {
		t.Fatalf("Observe under the ACL: got term %d before any campaign, want none", v.Term)
	}
	must("Campaign", cl.Campaign(ctx, "leader", time.Minute, []byte("v"), func(ctx context.Context, term uint64) error {
		if _, err := cl.Leader(ctx, "leader"); err != nil {
			return err
		}
		if v := next("the leader"); string(v.Value) != "v" || v.Term != term {
			t.Errorf("Observe under the ACL: got %q term %d, want the leader %q term %d", v.Value, v.Term, "v", term)
		}
		if err := cl.Proclaim(ctx, "leader", term, []byte("w")); err != nil {
			return err
		}
		// Seen before the leader resigns: a read after both would find
		// only the vacancy, as Observe's doc says.
		if v := next("the proclaimed value"); string(v.Value) != "w" || v.Term != term {
			t.Errorf("Observe under the ACL: got %q term %d, want the proclaimed %q term %d", v.Value, v.Term, "w", term)
		}
		return nil
	}))
	if v := next("the vacancy"); v.Term != 0 {
		t.Fatalf("Observe under the ACL: got term %d after the leader resigned, want none", v.Term)
	}

	// The operator's tools.
	_, err = el.TryObtain(ctx, "stuck", time.Minute)
	must("TryObtain", err)
	_, err = el.Inspect(ctx, "stuck")
	must("Inspect", err)
	_, err = el.Break(ctx, "stuck")
	must("Break", err)
	_, err = cl.TryAcquire(ctx, "stuck-account", time.Minute)
	must("TryAcquire", err)
	_, err = cl.Inspect(ctx, "stuck-account")
	must("correctness Inspect", err)
	_, err = cl.Break(ctx, "stuck-account")
	must("correctness Break", err)
	_, err = sem.Inspect(ctx)
	must("Semaphore.Inspect", err)
	fs, err := cl.Audit(ctx)
	must("Audit", err)
	for _, f := range fs {
		if f.Status == correctness.StatusUnverified || f.Check == "scripting" && f.Status != correctness.StatusOK {
			t.Errorf("Audit %s under the documented ACL: got %v (%s)", f.Check, f.Status, f.Detail)
		}
	}
	replicated := correctness.New(c, correctness.WithReplicas(1, 10*time.Millisecond), correctness.WithAudit(false))
	defer replicated.Close()
	if _, err := replicated.TryAcquire(ctx, "replicated", time.Minute); !errors.Is(err, correctness.ErrNotReplicated) {
		t.Fatalf("WAIT under the ACL: got %v, want ErrNotReplicated (no replica), not a permission error", err)
	}
}

func TestMissingPermissionSaysNOPERM(t *testing.T) {
	cases := []struct {
		name    string
		without string
		op      func(ctx context.Context, c *redis.Client) error
		want    string // the operation the error must name
		// held: the refused operation is a release, so the lock it was to
		// release stays, as it should.
		held bool
	}{
		{"no SET", "+set", func(ctx context.Context, c *redis.Client) error {
			l := efficiency.New(c)
			defer l.Close()
			_, err := l.TryObtain(ctx, "k", time.Minute)
			return err
		}, "acquire", false},
		{"no scripts", "+evalsha +eval", func(ctx context.Context, c *redis.Client) error {
			return obtainAndRelease(ctx, c)
		}, "release", true},
		{"no PUBLISH", "+publish", func(ctx context.Context, c *redis.Client) error {
			// The release of a lock that a waiter marked publishes a
			// wake-up for waiters that do not queue.
			l := efficiency.New(c)
			defer l.Close()
			lock, err := l.TryObtain(ctx, "k", time.Minute)
			if err != nil {
				return err
			}
			waiter := efficiency.New(redistest.WakeOnly{Client: c})
			defer waiter.Close()
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			if _, err := waiter.Obtain(wctx, "k", time.Minute); !errors.Is(err, efficiency.ErrNotObtained) {
				return fmt.Errorf("the waiter: got %v, want ErrNotObtained", err)
			}
			return lock.Release(ctx)
		}, "release", true},
		{"no INCR", "+incr", func(ctx context.Context, c *redis.Client) error {
			l := correctness.New(c, correctness.WithClockFloor(false), correctness.WithAudit(false))
			defer l.Close()
			_, err := l.TryAcquire(ctx, "k", time.Minute)
			return err
		}, "acquire", false},
		{"no HSET", "+hset", func(ctx context.Context, c *redis.Client) error {
			return correctness.NewRegister(c).Write(ctx, "k", 1, []byte("v"))
		}, "register write", false},
		{"no WAIT", "+wait", func(ctx context.Context, c *redis.Client) error {
			l := correctness.New(c, correctness.WithReplicas(1, 10*time.Millisecond), correctness.WithAudit(false))
			defer l.Close()
			_, err := l.TryAcquire(ctx, "k", time.Minute)
			return err
		}, "acquire", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			line := leastPrivilege
			for _, p := range strings.Fields(tc.without) {
				line = strings.Replace(line, " "+p+" ", " ", 1)
			}
			c := user(t, s.Client(t), line)
			err := tc.op(t.Context(), c)
			if err == nil || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying NOPERM and naming %q", err, tc.want)
			}
			// A refused operation leaves no grant behind, even one the
			// script had made before the refusal (WAIT after the acquire).
			if n := s.Client(t).Exists(t.Context(), "leasekit:{k}").Val(); n != 0 && !tc.held {
				t.Fatalf("the lock key is left behind after the refusal")
			}
		})
	}
}

// TestAuditChecksScripting: the audit tells a user that may not run EVAL or
// EVALSHA, the ones a lock cannot do without, from one that may; and a
// Locker's first acquire logs it.
func TestAuditChecksScripting(t *testing.T) {
	s := redistest.Start(t)
	for _, tc := range []struct {
		name, without string
		want          correctness.Status
		says          []string // what the detail must name
	}{
		{"least-privilege", "", correctness.StatusOK, nil},
		{"no-eval", "+eval", correctness.StatusRisk, []string{"denies EVAL:", "+eval"}},
		{"no-evalsha", "+evalsha", correctness.StatusRisk, []string{"denies EVALSHA:", "+evalsha"}},
		{"neither", "+evalsha +eval", correctness.StatusRisk, []string{"denies EVAL:", "denies EVALSHA:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := strings.Replace(leastPrivilege, "leasekit on", tc.name+" on", 1)
			for _, p := range strings.Fields(tc.without) {
				line = strings.Replace(line, " "+p+" ", " ", 1)
			}
			c := user(t, s.Client(t), line)
			rec := &records{}
			l := correctness.New(c, correctness.WithLogger(slog.New(rec)))
			defer l.Close()
			fs, err := l.Audit(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var got correctness.Finding
			for _, f := range fs {
				if f.Check == "scripting" {
					got = f
				}
			}
			if got.Status != tc.want {
				t.Fatalf("scripting: got %v (%s), want %v", got.Status, got.Detail, tc.want)
			}
			for _, want := range tc.says {
				if !strings.Contains(got.Detail, want) {
					t.Errorf("scripting detail: got %q, want it to say %q", got.Detail, want)
				}
			}
			// The first acquire logs the finding, even when it fails for
			// want of the permission.
			_, _ = l.TryAcquire(t.Context(), "audited", time.Minute)
			if logged := rec.has("correctness: audit: scripting risk"); logged != (tc.want == correctness.StatusRisk) {
				t.Errorf("the first acquire logged the scripting risk: %v, want %v", logged, tc.want == correctness.StatusRisk)
			}
		})
	}
}

// records is a slog.Handler that keeps the messages it is given.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) has(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.msgs, msg)
}

// obtainAndRelease takes an efficiency lock, which needs only SET, and
// releases it, which needs the release script and what it calls.
func obtainAndRelease(ctx context.Context, c redis.UniversalClient) error {
	l := efficiency.New(c)
	defer l.Close()
	lock, err := l.TryObtain(ctx, "k", time.Minute)
	if err != nil {
		return err
	}
	return lock.Release(ctx)
}
