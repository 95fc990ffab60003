package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/redis/go-redis/v9"
)

// locker is one lock library as the scenarios use it: its waiting acquire, so
// that every library is compared doing the same thing, and a release.
type locker interface {
	// acquire takes the lock called key for the run's ttl, waiting while it is
	// held, until ctx ends or the library gives up by its own rules.
	acquire(ctx context.Context, key string) (held, error)
	close() error
}

// held is a granted lock. Every library's lock type but redsync's has this
// method already.
type held interface {
	Release(ctx context.Context) error
}

// library is a lock library the bench can run, with how it is configured.
type library struct {
	name string
	// describe states the configuration, for the output.
	describe func(ttl time.Duration) string
	// open makes the one instance that every goroutine of the process shares,
	// as the library's users do.
	open func(client *redis.Client, ttl time.Duration) locker
}

// libraries are every library the bench knows, in the order they run.
var libraries = []library{
	{
		name: "efficiency",
		describe: func(ttl time.Duration) string {
			return fmt.Sprintf("leasekit efficiency: one efficiency.New(client) (default options); Obtain(ctx, key, %v); a waiter queues and the release hands it the lock, announced by pub/sub", ttl)
		},
		open: func(client *redis.Client, ttl time.Duration) locker {
			l := efficiency.New(client)
			return adapter[*efficiency.Lock]{obtain: l.Obtain, stop: l.Close, ttl: ttl}
		},
	},
	{
		name: "correctness",
		describe: func(ttl time.Duration) string {
			return fmt.Sprintf("leasekit correctness: one correctness.New(client, WithAudit(false)) (fencing tokens, clock floor on; audit off: it only logs); Acquire(ctx, key, %v)", ttl)
		},
		open: func(client *redis.Client, ttl time.Duration) locker {
			l := correctness.New(client, correctness.WithAudit(false))
			return adapter[*correctness.Lease]{obtain: l.Acquire, stop: l.Close, ttl: ttl}
		},
	},
	{
		name: "redsync",
		describe: func(ttl time.Duration) string {
			return fmt.Sprintf("redsync %s: one redsync.New(goredis.NewPool(client)), NewMutex(key, WithExpiry(%v)) per acquisition, LockContext; defaults otherwise (32 tries, 50-250 ms random delay)",
				moduleVersion("github.com/go-redsync/redsync/v4"), ttl)
		},
		open: func(client *redis.Client, ttl time.Duration) locker {
			rs := redsync.New(goredis.NewPool(client))
			return adapter[redsyncHeld]{ttl: ttl, obtain: func(ctx context.Context, key string, ttl time.Duration) (redsyncHeld, error) {
				m := rs.NewMutex(key, redsync.WithExpiry(ttl))
				return redsyncHeld{m: m}, m.LockContext(ctx)
			}}
		},
	},
	{
		name: "redislock",
		describe: func(ttl time.Duration) string {
			return fmt.Sprintf("bsm/redislock %s: one redislock.New(client); Obtain(ctx, key, %v, RetryStrategy LinearBackoff(10ms)) (its default never waits)",
				moduleVersion("github.com/bsm/redislock"), ttl)
		},
		open: func(client *redis.Client, ttl time.Duration) locker {
			c := redislock.New(client)
			opts := &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)}
			return adapter[*redislock.Lock]{ttl: ttl, obtain: func(ctx context.Context, key string, ttl time.Duration) (*redislock.Lock, error) {
				return c.Obtain(ctx, key, ttl, opts)
			}}
		},
	},
}

// libraryNames are the names -libs accepts.
func libraryNames() []string {
	names := make([]string, len(libraries))
	for i, l := range libraries {
		names[i] = l.name
	}
	return names
}

// moduleVersion is the version of a module built into this binary.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "(version unknown)"
}

// adapter is a locker made of a library's waiting acquire and, for the
// libraries that have one, its shutdown.
type adapter[L held] struct {
	obtain func(ctx context.Context, key string, ttl time.Duration) (L, error)
	stop   func() error
	ttl    time.Duration
}

func (a adapter[L]) acquire(ctx context.Context, key string) (held, error) {
	lock, err := a.obtain(ctx, key, a.ttl)
	if err != nil {
		return nil, err // never a non-nil held holding a nil lock
	}
	return lock, nil
}

func (a adapter[L]) close() error {
	if a.stop == nil {
		return nil
	}
	return a.stop()
}

// redsyncHeld gives a redsync mutex the Release the scenarios call.
type redsyncHeld struct{ m *redsync.Mutex }

var errRedsyncNotHeld = errors.New("redsync: unlock found the lock gone")

func (h redsyncHeld) Release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errRedsyncNotHeld
	}
	return err
}
