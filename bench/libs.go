package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/efficiency/rueidisconn"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// locker is one lock library as the scenarios use it: its waiting acquire, so
// that every library is compared doing the same thing, and a release.
type locker interface {
	// acquire takes the lock called key for the run's ttl, waiting while it is
	// held, until ctx ends or the library gives up by its own rules.
	acquire(ctx context.Context, key string) (held, error)
	close() error
}

// held is a granted lock.
type held interface {
	Release(ctx context.Context) error
}

// library is a lock library the bench can run, with how it is configured.
type library struct {
	name string
	// describe states the configuration, for the output.
	describe func(ttl time.Duration, t *target) string
	// open makes the one instance that every goroutine of a process shares,
	// as the library's users do, on client (a go-redis client of t) or, for a
	// library with a client of its own, on t.
	open func(t *target, client redis.UniversalClient, ttl time.Duration) (locker, error)
	// queue is the key of the wait queue in which the server lines up the
	// waiters for the lock called name; nil for a library without one.
	queue func(name string) string
	// etcd says the library needs the -etcd cluster: it runs only with
	// -etcd, and only where etcdRunsIn says.
	etcd bool
	// ownClient says the library runs on a rueidis client of its own, whose
	// commands the go-redis client's hooks (convoy-procs first acquire)
	// do not see.
	ownClient bool
}

// runsIn reports whether the library runs in the scenario called name.
func (l library) runsIn(name string) bool { return !l.etcd || etcdRunsIn(name) }

// libraries are every library the bench knows, in the order they run.
var libraries = []library{
	{
		name: "efficiency",
		describe: func(ttl time.Duration, _ *target) string {
			return fmt.Sprintf("leasekit efficiency: one efficiency.New(client) (default options); Obtain(ctx, key, %v); a waiter queues (one server, or a Redis 7 cluster) and the release hands it the lock, announced by pub/sub", ttl)
		},
		open: func(_ *target, client redis.UniversalClient, ttl time.Duration) (locker, error) {
			l := efficiency.New(client)
			return adapter[*efficiency.Lock]{obtain: l.Obtain, stop: l.Close, ttl: ttl}, nil
		},
		queue: leasekitQueue,
	},
	{
		name: "correctness",
		describe: func(ttl time.Duration, _ *target) string {
			return fmt.Sprintf("leasekit correctness: one correctness.New(client, WithAudit(false)) (fencing tokens from the lock's Redis counter, clock floor on; audit off: it only logs); Acquire(ctx, key, %v)", ttl)
		},
		open: func(_ *target, client redis.UniversalClient, ttl time.Duration) (locker, error) {
			l := correctness.New(client, correctness.WithAudit(false))
			return adapter[*correctness.Lease]{obtain: l.Acquire, stop: l.Close, ttl: ttl}, nil
		},
		queue: leasekitQueue,
	},
	{
		name: "efficiency-rueidis",
		describe: func(ttl time.Duration, t *target) string {
			return fmt.Sprintf("leasekit efficiency-rueidis (efficiency on rueidis %s): one efficiency.NewConn(rueidisconn.New(client)) per process on a rueidis client of its own, configured as rueidislock's (%s); Obtain(ctx, key, %v), waiting as efficiency's",
				moduleVersion("github.com/redis/rueidis"), rueidisCache(t), ttl)
		},
		open: func(t *target, _ redis.UniversalClient, ttl time.Duration) (locker, error) {
			return onRueidis(t, ttl, func(conn efficiency.Conn) (obtainFunc[*efficiency.Lock], func() error) {
				l := efficiency.NewConn(conn)
				return l.Obtain, l.Close
			})
		},
		queue:     leasekitQueue,
		ownClient: true,
	},
	{
		name: "correctness-rueidis",
		describe: func(ttl time.Duration, t *target) string {
			return fmt.Sprintf("leasekit correctness-rueidis (correctness on rueidis %s): one correctness.NewConn(rueidisconn.New(client), WithAudit(false)) per process on a rueidis client of its own (%s); Acquire(ctx, key, %v)",
				moduleVersion("github.com/redis/rueidis"), rueidisCache(t), ttl)
		},
		open: func(t *target, _ redis.UniversalClient, ttl time.Duration) (locker, error) {
			return onRueidis(t, ttl, func(conn efficiency.Conn) (obtainFunc[*correctness.Lease], func() error) {
				l := correctness.NewConn(conn, correctness.WithAudit(false))
				return l.Acquire, l.Close
			})
		},
		queue:     leasekitQueue,
		ownClient: true,
	},
	{
		name: "correctness-etcd",
		describe: func(ttl time.Duration, _ *target) string {
			return fmt.Sprintf("leasekit correctness, tokens from etcd: one correctness.New(client, WithAudit(false), WithTokens(etcdtokens.New(etcd))); Acquire(ctx, key, %v): the grant in Redis as correctness's, then its token from one etcd Txn, stamped into the grant in one more Redis round trip before Acquire returns", ttl)
		},
		open:  openCorrectnessEtcd,
		queue: leasekitQueue,
		etcd:  true,
	},
	{
		name: "redsync",
		describe: func(ttl time.Duration, _ *target) string {
			return fmt.Sprintf("redsync %s: one redsync.New(goredis.NewPool(client)), NewMutex(key, WithExpiry(%v)) per acquisition, LockContext; defaults otherwise (32 tries, 50-250 ms random delay)",
				moduleVersion("github.com/go-redsync/redsync/v4"), ttl)
		},
		open: func(_ *target, client redis.UniversalClient, ttl time.Duration) (locker, error) {
			rs := redsync.New(goredis.NewPool(client))
			return adapter[redsyncHeld]{ttl: ttl, obtain: func(ctx context.Context, key string, ttl time.Duration) (redsyncHeld, error) {
				m := rs.NewMutex(key, redsync.WithExpiry(ttl))
				return redsyncHeld{m: m}, m.LockContext(ctx)
			}}, nil
		},
	},
	{
		name: "redislock",
		describe: func(ttl time.Duration, _ *target) string {
			return fmt.Sprintf("bsm/redislock %s: one redislock.New(client); Obtain(ctx, key, %v, RetryStrategy LinearBackoff(10ms)) (its default never waits)",
				moduleVersion("github.com/bsm/redislock"), ttl)
		},
		open: func(_ *target, client redis.UniversalClient, ttl time.Duration) (locker, error) {
			c := redislock.New(client)
			opts := &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)}
			return adapter[*redislock.Lock]{ttl: ttl, obtain: func(ctx context.Context, key string, ttl time.Duration) (*redislock.Lock, error) {
				return c.Obtain(ctx, key, ttl, opts)
			}}, nil
		},
	},
	{
		name: "rueidislock",
		describe: func(ttl time.Duration, t *target) string {
			cache := "client-side caching on (a release invalidates the key and every waiting process tries again)"
			if t.noTracking {
				cache = "DisableCache: miniredis has no CLIENT TRACKING, so waiters poll every TryNextAfter (20 ms)"
			}
			return fmt.Sprintf("rueidislock %s: one rueidislock.NewLocker per process on its own rueidis client (InitAddress the same server%s); KeyMajority 1 (one server: one key, not a majority of three), KeyValidity %v, defaults otherwise (ExtendInterval validity/2, TryNextAfter 20ms); %s; WithContext(ctx, key), release by its CancelFunc",
				moduleVersion("github.com/redis/rueidis"), map[bool]string{true: "s, cluster mode", false: ""}[t.cluster], ttl, cache)
		},
		open:      openRueidislock,
		ownClient: true,
	},
	{
		name: "etcd-mutex",
		describe: func(ttl time.Duration, _ *target) string {
			return fmt.Sprintf("etcd concurrency.Mutex %s on the etcd cluster, no Redis: a concurrency.NewSession(etcd, WithTTL(%d)) per contender, reused (contenders sharing a session would all own the lock at once); NewMutex(session, key) per acquisition, Lock(ctx), Unlock(ctx); its token is Header().Revision",
				moduleVersion("go.etcd.io/etcd/client/v3"), etcdSessionTTL(ttl))
		},
		open: openEtcdMutex,
		etcd: true,
	},
}

// isLeasekit reports whether the library called name is one of leasekit's
// locks (they queue their waiters), on any client.
func isLeasekit(name string) bool {
	l, ok := libraryNamed(name)
	return ok && l.queue != nil
}

// leasekitQueue is the wait queue of leasekit's lock called name, under the
// default prefix that both Lockers run with.
func leasekitQueue(name string) string {
	return scripts.QueueKey(scripts.LockKey(scripts.DefaultPrefix, name))
}

// rueidisOption is the rueidis client option of every rueidis subject: the
// target's server, and client-side caching on where the server tracks keys.
// On miniredis the client is forced to one server: miniredis answers
// CLUSTER SLOTS, and rueidis would take it for a cluster.
func rueidisOption(t *target) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress: t.addrs, Username: t.user, Password: t.password, SelectDB: t.db, TLSConfig: t.tls,
		DisableCache: t.noTracking, ForceSingleClient: t.mini != nil,
	}
}

// rueidisCache says how the rueidis clients cache, for the output.
func rueidisCache(t *target) string {
	if t.noTracking {
		return "DisableCache: miniredis has no CLIENT TRACKING"
	}
	return "client-side caching on"
}

// countRueidis makes a rueidis client of opt that counts its commands in
// t.sent.
func countRueidis(t *target) func(opt rueidis.ClientOption) (rueidis.Client, error) {
	return func(opt rueidis.ClientOption) (rueidis.Client, error) {
		c, err := rueidis.NewClient(opt)
		if err != nil {
			return nil, err
		}
		return countedRueidis{Client: c, sent: t.sent}, nil
	}
}

// onRueidis opens a rueidis client of t's, as openRueidislock's, and the
// Locker that mk makes on it, which closes the client as it closes.
func onRueidis[L held](t *target, ttl time.Duration, mk func(efficiency.Conn) (obtainFunc[L], func() error)) (locker, error) {
	c, err := countRueidis(t)(rueidisOption(t))
	if err != nil {
		return nil, fmt.Errorf("rueidis: %w", err)
	}
	obtain, stop := mk(rueidisconn.New(c))
	return adapter[L]{obtain: obtain, ttl: ttl, stop: func() error {
		err := stop()
		c.Close()
		return err
	}}, nil
}

// openRueidislock opens a rueidislock Locker on a rueidis client of its own,
// which counts its commands in t.sent.
func openRueidislock(t *target, _ redis.UniversalClient, ttl time.Duration) (locker, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:  rueidisOption(t),
		ClientBuilder: countRueidis(t),
		KeyMajority:   1,
		KeyValidity:   ttl,
	})
	if err != nil {
		return nil, fmt.Errorf("rueidislock: %w", err)
	}
	return rueidisAdapter{l: l}, nil
}

// needsEtcd reports whether the library called name needs -etcd.
func needsEtcd(name string) bool {
	l, ok := libraryNamed(name)
	return ok && l.etcd
}

// libraryNames are the names -libs accepts.
func libraryNames() []string {
	names := make([]string, len(libraries))
	for i, l := range libraries {
		names[i] = l.name
	}
	return names
}

func libraryNamed(name string) (library, bool) {
	for _, l := range libraries {
		if l.name == name {
			return l, true
		}
	}
	return library{}, false
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

// obtainFunc is a library's waiting acquire.
type obtainFunc[L held] func(ctx context.Context, key string, ttl time.Duration) (L, error)

// adapter is a locker made of a library's waiting acquire and, for the
// libraries that have one, its shutdown.
type adapter[L held] struct {
	obtain obtainFunc[L]
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

// rueidisAdapter is a rueidislock Locker as a locker: its lock is a context
// that ends when the lock is lost, and the release is that context's cancel,
// which returns once the key is deleted.
type rueidisAdapter struct{ l rueidislock.Locker }

func (a rueidisAdapter) acquire(ctx context.Context, key string) (held, error) {
	_, cancel, err := a.l.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return rueidisHeld(cancel), nil
}

func (a rueidisAdapter) close() error { a.l.Close(); return nil }

type rueidisHeld context.CancelFunc

func (h rueidisHeld) Release(context.Context) error { h(); return nil }

// countedRueidis counts the commands a rueidis client sends, as sentCounter
// does for go-redis.
type countedRueidis struct {
	rueidis.Client
	sent *sentCounter
}

func (c countedRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.sent.trips.Add(1)
	c.sent.add(strings.ToLower(cmd.Commands()[0]), 1)
	if c.sent.firsts {
		noteFirst(ctx, func() []string { return slices.Clone(cmd.Commands()) })
	}
	return c.Client.Do(ctx, cmd)
}

func (c countedRueidis) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.sent.trips.Add(1)
	for i := range multi {
		c.sent.add(strings.ToLower(multi[i].Commands()[0]), 1)
	}
	if c.sent.firsts && len(multi) > 0 {
		noteFirst(ctx, func() []string { return slices.Clone(multi[0].Commands()) })
	}
	return c.Client.DoMulti(ctx, multi...)
}
