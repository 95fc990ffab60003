// Package lease is the engine behind leasekit's two kinds of lock, and
// efficiency's semaphores. A Core acquires a lock in one round trip, or waits
// in the lock's queue for a release to hand it over; a Semaphore does the same
// for a permit; a Held is a granted lease (a lock or a permit), with its
// deadline on the monotonic clock, refresh, release, and Hold (a function run
// while the lease is kept alive). Packages efficiency and correctness configure
// a Core with a Config and wrap its results in their own types; leasetest reads
// and writes the same keys through package scripts, the protocol's home.
//
// How waiting works is in docs/waiting.md; the strings that travel between
// client and server, in package scripts (wire.go, keys.go).
package lease

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/redis/go-redis/v9"
)

// Errors are the sentinel errors of the package using the engine, so that its
// callers can test them with errors.Is.
type Errors struct {
	NotObtained error
	// Taken is for an attempt that found the lock (or every permit) held
	// by another owner, and never for an ended context; it matches
	// NotObtained too (NewTaken). A Core without it uses NotObtained.
	Taken      error
	NotHeld    error
	LockLost   error
	InvalidKey error
	InvalidTTL error
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
	// NoToken is for a grant whose token Config.Tokens could not draw.
	NoToken error
	// InvalidLimit is for a semaphore whose limit is below 1, and
	// LimitMismatch for an acquire of a semaphore whose live permits were
	// granted under another limit (kinds with semaphores).
	InvalidLimit, LimitMismatch error
}

// Config configures a Core: what kind of lock, on which client, named how,
// and the package's sentinel errors.
type Config struct {
	// Kind is "efficiency" or "correctness": the prefix of every error and
	// log message.
	Kind string
	// Conn is what the Core sends its commands and subscribes through;
	// port.GoRedis(Client) when nil.
	Client      redis.UniversalClient
	Conn        port.Conn
	Prefix      string
	DriftFactor float64
	Owners      io.Reader // nil: crypto/rand
	Logger      *slog.Logger
	Errors      Errors
	// Fenced says grants carry a fencing token from the lock's counter key,
	// with the clock floor when ClockFloor is set, and ExpiringCounter says
	// the counter expires with the lease that drew from it.
	Fenced          bool
	ClockFloor      bool
	ExpiringCounter bool
	// Tokens, when not nil, draws every grant's token in place of the
	// counter (tokens.go); the counter's token is its floor. Fenced only.
	Tokens Tokens
	// Replicas, when positive, makes every grant wait until that many
	// replicas confirm it (WAIT), at most ReplicaWait; a grant fewer confirm
	// is released and fails with NotReplicated.
	Replicas    int
	ReplicaWait time.Duration
	// Telemetry records metrics and spans; nil records nothing.
	Telemetry *telemetry.Telemetry
	// TryOp and WaitOp name the acquires in spans (TryObtain and Obtain, or
	// TryAcquire and Acquire).
	TryOp, WaitOp string
}

// Core runs locks of one kind for one Locker.
type Core struct {
	cfg    Config
	listen *listener
	strays *strays
	closed atomic.Bool
	names  sync.Map     // lock name -> *keySet, for up to keyCacheSize names
	cached atomic.Int64 // entries in names
	semTel sync.Map     // a semaphore's limit -> its *telemetry.Telemetry
	// kind is the lock's kind as the scripts name it (grant.lua): "e", "f",
	// "c" or "t"; kindArg is kind boxed once, the ARGV[3] of the locks'
	// grant scripts.
	kind    string
	kindArg any
	// markLife is how long the mark of an ended grant lasts (release.lua),
	// in ms, boxed once: markLife(cfg.Conn).
	markLife any
	// plain is what the Core found of the server's plain compare-and-set
	// commands (plain.go).
	plain plain
	// px is the ttl last granted with SET NX, in ms and boxed (pxArg).
	px atomic.Pointer[boxedMillis]
}

// boxedMillis is a ttl, and its milliseconds boxed for a command.
type boxedMillis struct {
	ttl time.Duration
	ms  any
}

// pxArg is ttl in ms, boxed for SET NX's PX: the box of the ttl last asked
// for is kept, so that a Locker whose locks share a ttl (the usual case)
// boxes it once rather than on every grant.
func (c *Core) pxArg(ttl time.Duration) any {
	if b := c.px.Load(); b != nil && b.ttl == ttl {
		return b.ms
	}
	b := &boxedMillis{ttl: ttl, ms: Millis(ttl)}
	c.px.Store(b)
	return b.ms
}

// New returns a Core. The caller has validated cfg.
func New(cfg Config) *Core {
	if cfg.Kind == "" {
		cfg.Kind = "leasekit"
	}
	if cfg.Conn == nil {
		cfg.Conn = port.GoRedis(cfg.Client)
	}
	c := &Core{cfg: cfg, kind: scriptKind(cfg), markLife: strconv.FormatInt(Millis(markLife(cfg.Conn)), 10)}
	c.kindArg = c.kind
	c.strays = &strays{c: c, m: make(map[string]*stray), taken: make(map[string]*took), done: make(chan struct{})}
	c.listen = newListener(c)
	return c
}

// scriptKind is the lock's kind as the scripts name it.
func scriptKind(cfg Config) string {
	switch {
	case !cfg.Fenced:
		return "e"
	case cfg.ClockFloor && cfg.ExpiringCounter:
		return "t"
	case cfg.ClockFloor:
		return "c"
	}
	return "f"
}

// Close makes every new acquire fail with Errors.Closed, ends the waits under
// way with it, and stops listening for releases. Held leases can still be
// refreshed and released.
func (c *Core) Close() error {
	c.closed.Store(true)
	err := c.listen.close()
	c.strays.close()
	return err
}

// drift is the safety margin taken off a lease of length ttl: the clock drift
// between client and server (DriftFactor of ttl) plus 2 ms for Redis's expiry
// precision, but at most half the ttl, so that a lease of a few milliseconds
// is still usable for half its length.
func (c *Core) drift(ttl time.Duration) time.Duration {
	return min(time.Duration(float64(ttl)*c.cfg.DriftFactor)+2*time.Millisecond, ttl/2)
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

// closedErr is the error of a new acquire of the lock or semaphore at lk by a
// closed Core.
func (c *Core) closedErr(lk *keySet) error {
	return fmt.Errorf("%w: cannot acquire %s", c.cfg.Errors.Closed, lk.label())
}

// markLife is how long the mark of an ended grant lasts (release.lua): at
// least as long as the client may take to send a command again after its
// reply was lost (its RetryWindow), so that every resend finds it (each
// resend that finds it makes it last that long again); and at least Linger,
// for a caller that resends a Release itself. A client that cannot tell
// gets maxMarkLife.
func markLife(client port.Client) time.Duration {
	window := client.RetryWindow()
	if window <= 0 {
		return maxMarkLife
	}
	return min(max(window, Linger), maxMarkLife)
}

// maxMarkLife bounds markLife: a mark costs Redis about 100 bytes while it
// lasts, for every release.
const maxMarkLife = time.Minute

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
