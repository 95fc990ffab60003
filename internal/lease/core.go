// Package lease is the engine shared by leasekit's two kinds of lock: acquiring
// in one round trip, waiting in the lock's queue for a release to hand it over
// (or for a wake-up, where waiters cannot queue), lease deadlines on the
// monotonic clock, refresh, release, and holding a lease while a function runs.
//
// The public packages efficiency and correctness configure it with a Config:
// what kind of lock it is (fenced or not, with which token rules) and their
// own sentinel errors.
//
// The files: core.go (the Core and its Config), acquire.go (one attempt, and
// Try), waiter.go (Obtain's wait), handoff.go (the wire format of the
// handoff), held.go (a granted lease: refresh, release, ttl), keepalive.go
// (Do, Hold and Once), keys.go (key names and the key cache), script.go
// (running the Lua scripts), errors.go (how failures are named and sorted),
// input.go (checks of names and ttls), owner.go (owner ids).
package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/redis/go-redis/v9"
)

// Errors are the sentinel errors of the package using the engine, so that its
// callers can test them with errors.Is.
type Errors struct {
	NotObtained error
	NotHeld     error
	LockLost    error
	InvalidKey  error
	InvalidTTL  error
	// Closed is for a new operation of a closed Locker, and a wait that its
	// Locker's Close ended.
	Closed error
	// Late is for a grant whose reply came after its lease deadline: it was
	// released, so nobody holds it.
	Late error
	// InvalidToken is for a grant whose token is not a positive 64-bit
	// integer, or a fence counter no token can be drawn from (fenced kinds).
	InvalidToken error
	// NotReplicated is for a grant fewer replicas confirmed than Replicas
	// asks (fenced kinds).
	NotReplicated error
}

// Config configures a Core. It is data: what kind of lock, on which client,
// named how, and the package's sentinel errors.
type Config struct {
	// Kind is "efficiency" or "correctness": the prefix of every error and
	// log message.
	Kind        string
	Client      redis.UniversalClient
	Prefix      string
	DriftFactor float64
	Owners      io.Reader // nil: crypto/rand
	Logger      *slog.Logger
	Errors      Errors
	// Fenced says the kind's grants carry a fencing token, drawn from the
	// lock's counter key, with the clock floor when ClockFloor is set; a
	// fenced grant stores "owner:token" in the lock key, an unfenced one the
	// owner id.
	Fenced     bool
	ClockFloor bool
	// ExpiringCounter says the counter key expires with the lease that
	// drew from it (fenced kinds with the clock floor only).
	ExpiringCounter bool
	// Replicas, when positive, makes every grant wait, in its own round
	// trip, until that many replicas confirm it (WAIT), at most ReplicaWait;
	// a grant fewer confirm is released and fails with NotReplicated. A grant
	// handed over by another holder's release is confirmed by the waiter in
	// one round trip of its own (see confirmHanded).
	Replicas    int
	ReplicaWait time.Duration
	// Telemetry records the kind's metrics and spans; nil records nothing.
	Telemetry *telemetry.Telemetry
	// TryOp and WaitOp name the acquires in spans (TryObtain and Obtain, or
	// TryAcquire and Acquire).
	TryOp, WaitOp string
}

// Core runs locks of one kind for one Locker.
type Core struct {
	cfg      Config
	notifier *notify.Notifier
	closed   atomic.Bool
	names    sync.Map     // lock name -> *Keys, for up to keyCacheSize names
	cached   atomic.Int64 // entries in names
	// grants is the channel on which this Core's waiters hear the lock handed
	// to them on a single server; "" elsewhere.
	grants string
	// id names this Core's sharded grant channels (ShardedGrantChannel), and
	// sharded says its waiters queue with them: in Redis Cluster 7 and
	// later, until a cluster refuses SSUBSCRIBE (Redis 6).
	id        string
	sharded   atomic.Bool
	unsharded sync.Once
	// kind and channels are script arguments, boxed once (see script.go):
	// the lock's kind, and the release script's ARGV[4], whether queue
	// entries' grant channels are sharded (on a ClusterClient).
	kind, channels any
}

// New returns a Core. The caller has validated cfg.
//
// Waiters queue for a direct handoff on a *redis.Client (one server, or a
// Sentinel-managed master), with one grant channel per Locker, and on a
// ClusterClient with one sharded channel per lock and Locker, which hashes to
// the lock's slot: the release script runs on the lock's master, and counts
// and reaches the subscribers of the master it runs on (PUBSUB NUMSUB or
// SHARDNUMSUB). A Ring's waiters, a Redis 6 cluster's (no sharded pub/sub)
// and a ClusterClient's that reads from replicas (its subscriptions would be
// on a replica) do not queue: they wait for a wake-up and try again
// (docs/waiting.md).
func New(cfg Config) *Core {
	if cfg.Kind == "" {
		cfg.Kind = "leasekit"
	}
	c := &Core{cfg: cfg, notifier: notify.New(cfg.Client)}
	c.kind, c.channels = c.Kind(), plainChannels
	switch client := cfg.Client.(type) {
	case *redis.Client:
		c.grants = GrantChannel(cfg.Prefix, rand.Text())
	case *redis.ClusterClient:
		c.channels = shardedChannels
		o := client.Options()
		switch {
		case o.ReadOnly || o.RouteByLatency || o.RouteRandomly:
			c.logger().Info(cfg.Kind + ": the cluster client reads from replicas, where its subscriptions would be too: waiters do not queue, and a release wakes one waiter per Locker")
		default:
			c.id = rand.Text()
			c.sharded.Store(true)
		}
	case *redis.Ring:
		c.logger().Info(cfg.Kind + ": waiters on a Ring do not queue: a release wakes one waiter per Locker, which tries again")
	}
	return c
}

// stopSharding makes this Core's waiters stop queueing, on a cluster that
// refused a sharded subscription with err (Redis 6 has none), and says so
// once.
func (c *Core) stopSharding(err error) {
	c.sharded.Store(false)
	c.unsharded.Do(func() {
		c.logger().Warn(c.cfg.Kind+": the cluster has no sharded pub/sub (Redis 7 and later): waiters do not queue, and a release wakes one waiter per Locker",
			"err", err)
	})
}

// Close makes every new acquire fail with Errors.Closed, ends the waits under
// way with it, and stops the wake-up subscription. Held leases can still be
// refreshed and released.
func (c *Core) Close() error {
	c.closed.Store(true)
	return c.notifier.Close()
}

// Kind is the lock's kind as the scripts name it (see scripts/grant.lua): "e"
// for an efficiency lock, "f" for a fenced one, "c" for one with the clock
// floor, "t" for one whose counter also expires.
func (c *Core) Kind() string {
	switch {
	case !c.cfg.Fenced:
		return "e"
	case c.cfg.ClockFloor && c.cfg.ExpiringCounter:
		return "t"
	case c.cfg.ClockFloor:
		return "c"
	}
	return "f"
}

// Drift is the safety margin taken off a lease of length ttl: the clock drift
// between client and server (DriftFactor of ttl) plus 2 ms for Redis's expiry
// precision, but at most half the ttl, so that a lease of a few milliseconds
// is still usable for half its length.
func (c *Core) Drift(ttl time.Duration) time.Duration {
	return min(time.Duration(float64(ttl)*c.cfg.DriftFactor)+2*time.Millisecond, ttl/2)
}

// begin checks what every acquire must check before it touches Redis, and
// draws the caller's owner id.
func (c *Core) begin(ctx context.Context, name string, ttl time.Duration) (*Keys, string, error) {
	if c.closed.Load() {
		return nil, "", fmt.Errorf("%w: cannot acquire lock %s", c.cfg.Errors.Closed, Quote(name))
	}
	if err := CheckName(c.cfg.Errors.InvalidKey, name); err != nil {
		return nil, "", err
	}
	if err := CheckTTL(c.cfg.Errors.InvalidTTL, ttl); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", c.notObtained(name, err)
	}
	owner, err := NewOwner(c.cfg.Kind, c.cfg.Owners)
	if err != nil {
		return nil, "", err
	}
	return c.lockKeys(name), owner, nil
}

// outcome sorts an acquire's error for its telemetry.
func (c *Core) outcome(err error) telemetry.Outcome {
	e := c.cfg.Errors
	switch {
	case err == nil:
		return telemetry.Obtained
	case errors.Is(err, e.Late):
		return telemetry.Late
	case errors.Is(err, e.Closed):
		return telemetry.Closed
	case errors.Is(err, e.NotObtained):
		return telemetry.NotObtained
	}
	return telemetry.Failed
}

func (c *Core) logger() *slog.Logger {
	if c.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.cfg.Logger
}

// IsNilClient reports whether client is nil, or a nil pointer of one of
// go-redis's client types, which no Locker can use.
func IsNilClient(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}
