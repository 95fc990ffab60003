package faults_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

var quiet = slog.New(slog.DiscardHandler)

// lockKey is the Redis key of the lock called name under the default prefix.
func lockKey(name string) string { return scripts.LockKey(lease.DefaultPrefix, name) }

// startServer starts a dedicated redis-server with leasekit's scripts
// cached, so that a request a fault catches is the EVALSHA that runs a script
// and not one the server refuses with NOSCRIPT. It returns the server and a
// client that reaches it directly.
func startServer(t *testing.T, args ...string) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t, args...)
	direct := srv.Client(t)
	for _, s := range []*scripts.Script{scripts.FencedAcquire, scripts.Refresh, scripts.Release, scripts.PTTL} {
		if err := redistest.Script(s).Load(t.Context(), direct).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
	return srv, direct
}

// setCalls is how many SET commands srv has run, in scripts too: the acquire
// of either kind of lock is the only operation that sets the lock key.
func setCalls(t *testing.T, direct *redis.Client) int { return redistest.Calls(t, direct, "set") }

// newProxy starts a fault proxy to target, closed when the test ends.
func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// proxiedClient is a go-redis client that reaches Redis through p. With
// contextTimeouts it sets ContextTimeoutEnabled, so that a context's deadline
// bounds socket reads; go-redis's default ignores it and waits ReadTimeout.
func proxiedClient(t *testing.T, p *faultproxy.Proxy, contextTimeouts bool) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: contextTimeouts})
	t.Cleanup(func() { _ = c.Close() })
	// One pooled connection, so that a fault set afterwards does not also
	// slow the handshake of the next command's connection.
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}
	return c
}

// value reads key directly: "" when it does not exist.
func value(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	v, err := c.Get(t.Context(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// holds reports whether a lock value was written by owner: an efficiency
// lock stores the owner id, a correctness lock owner id:token.
func holds(value, owner string) bool {
	return value == owner || strings.HasPrefix(value, owner+":")
}

// waitFor polls cond every 10 ms until it holds or within has passed, and
// reports whether it held.
func waitFor(within time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// ownerSource hands out owner ids a test can recognise: 16 bytes, "faultsid"
// and a big-endian counter. Each read draws one id.
type ownerSource struct {
	mu   sync.Mutex
	n    uint64
	last string
}

func (s *ownerSource) Read(p []byte) (int, error) {
	if len(p) != 16 {
		return 0, fmt.Errorf("ownerSource: a read of %d bytes, want 16 (one owner id)", len(p))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	copy(p, "faultsid")
	binary.BigEndian.PutUint64(p[8:], s.n)
	s.last = base64.RawURLEncoding.EncodeToString(p)
	return len(p), nil
}

// Last is the owner id drawn last, as the lock key stores it.
func (s *ownerSource) Last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// grant is a lock of either kind.
type grant struct {
	token    uint64 // 0 for an efficiency lock
	deadline time.Time
	release  func(context.Context) error
	refresh  func(context.Context, time.Duration) error
	hold     func(context.Context, func(context.Context) error) error
}

// locker is the part of either kind of Locker the fault tests drive.
type locker struct {
	try    func(ctx context.Context, name string, ttl time.Duration) (*grant, error)
	obtain func(ctx context.Context, name string, ttl time.Duration) (*grant, error)
	do     func(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error) error
	// once is efficiency's Once; nil for correctness, which has none.
	once func(ctx context.Context, name string, period time.Duration, fn func(context.Context) error) (bool, error)
	// brk is the Locker's Break.
	brk   func(ctx context.Context, name string) (bool, error)
	close func() error
}

// lockConfig is what the fault tests set on a Locker of either kind.
type lockConfig struct {
	owners io.Reader    // where owner ids come from; nil: crypto/rand
	drift  float64      // the drift factor; 0: the default, 0.01
	log    *slog.Logger // nil: discard
	// meters and tracer, when set, receive the Locker's telemetry.
	meters metric.MeterProvider
	tracer trace.TracerProvider
}

func (c lockConfig) logger() *slog.Logger {
	if c.log == nil {
		return quiet
	}
	return c.log
}

// kind is one kind of lock, so that a test body runs on both.
type kind struct {
	name        string
	fenced      bool
	notObtained error
	lateGrant   error
	lockLost    error
	closed      error
	// open returns a locker on c, closed when the test ends.
	open func(t *testing.T, c redis.UniversalClient, cfg lockConfig) locker
	// acquireRequest matches a proxy chunk that carries an acquire of the
	// lock called name: SET ... NX, or the fenced acquire script by hash.
	acquireRequest func(name string) func([]byte) bool
}

var kinds = []kind{
	{
		name:        "efficiency",
		notObtained: efficiency.ErrNotObtained,
		lateGrant:   efficiency.ErrLateGrant,
		lockLost:    efficiency.ErrLockLost,
		closed:      efficiency.ErrClosed,
		open:        openEfficiency,
		acquireRequest: func(name string) func([]byte) bool {
			key := bulk(lockKey(name))
			return func(chunk []byte) bool {
				return bytes.Contains(bytes.ToLower(chunk), bulk("set")) && bytes.Contains(chunk, key)
			}
		},
	},
	{
		name:        "correctness",
		fenced:      true,
		notObtained: correctness.ErrNotObtained,
		lateGrant:   correctness.ErrLateGrant,
		lockLost:    correctness.ErrLockLost,
		closed:      correctness.ErrClosed,
		open:        openCorrectness,
		acquireRequest: func(name string) func([]byte) bool {
			key, hash := bulk(lockKey(name)), bulk(scripts.FencedAcquire.Hash())
			return func(chunk []byte) bool {
				return bytes.Contains(chunk, hash) && bytes.Contains(chunk, key)
			}
		},
	},
}

// bulk is s as a RESP bulk string's body between line ends, so that a match
// does not fire on a longer argument that contains s.
func bulk(s string) []byte { return []byte("\r\n" + s + "\r\n") }

func openEfficiency(t *testing.T, c redis.UniversalClient, cfg lockConfig) locker {
	opts := []efficiency.Option{efficiency.WithLogger(cfg.logger()), efficiency.WithOwnerSource(cfg.owners)}
	if cfg.drift != 0 {
		opts = append(opts, efficiency.WithDriftFactor(cfg.drift))
	}
	if cfg.meters != nil {
		opts = append(opts, efficiency.WithMeterProvider(cfg.meters), efficiency.WithTracerProvider(cfg.tracer))
	}
	l := efficiency.New(c, opts...)
	t.Cleanup(func() { _ = l.Close() })
	wrap := func(lock *efficiency.Lock, err error) (*grant, error) {
		if err != nil {
			return nil, err
		}
		return &grant{deadline: lock.Deadline(), release: lock.Release, refresh: lock.Refresh, hold: lock.Hold}, nil
	}
	return locker{
		try: func(ctx context.Context, name string, ttl time.Duration) (*grant, error) {
			return wrap(l.TryObtain(ctx, name, ttl))
		},
		obtain: func(ctx context.Context, name string, ttl time.Duration) (*grant, error) {
			return wrap(l.Obtain(ctx, name, ttl))
		},
		do:    l.Do,
		once:  l.Once,
		brk:   l.Break,
		close: l.Close,
	}
}

func openCorrectness(t *testing.T, c redis.UniversalClient, cfg lockConfig) locker {
	opts := []correctness.Option{correctness.WithLogger(cfg.logger()), correctness.WithAudit(false), correctness.WithOwnerSource(cfg.owners)}
	if cfg.drift != 0 {
		opts = append(opts, correctness.WithDriftFactor(cfg.drift))
	}
	if cfg.meters != nil {
		opts = append(opts, correctness.WithMeterProvider(cfg.meters), correctness.WithTracerProvider(cfg.tracer))
	}
	l := correctness.New(c, opts...)
	t.Cleanup(func() { _ = l.Close() })
	wrap := func(lease *correctness.Lease, err error) (*grant, error) {
		if err != nil {
			return nil, err
		}
		hold := func(ctx context.Context, fn func(context.Context) error) error {
			if fn == nil {
				return lease.Hold(ctx, nil)
			}
			return lease.Hold(ctx, func(ctx context.Context, _ uint64) error { return fn(ctx) })
		}
		return &grant{token: lease.Token(), deadline: lease.Deadline(), release: lease.Release, refresh: lease.Refresh, hold: hold}, nil
	}
	return locker{
		try: func(ctx context.Context, name string, ttl time.Duration) (*grant, error) {
			return wrap(l.TryAcquire(ctx, name, ttl))
		},
		obtain: func(ctx context.Context, name string, ttl time.Duration) (*grant, error) {
			return wrap(l.Acquire(ctx, name, ttl))
		},
		do: func(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error) error {
			if fn == nil {
				return l.Do(ctx, name, ttl, nil)
			}
			return l.Do(ctx, name, ttl, func(ctx context.Context, _ uint64) error { return fn(ctx) })
		},
		brk:   l.Break,
		close: l.Close,
	}
}

// span is one operation as its client saw it: it took effect at some instant
// between start (before the request was sent) and end (after the reply came).
type span struct {
	token      uint64
	start, end time.Time
}

// outOfOrder looks for two spans where a ended before b started, yet b's
// token is not above a's (strict) or is below it (not strict): the order in
// real time that tokens must follow.
func outOfOrder(spans []span, strict bool) (a, b span, found bool) {
	byEnd := slices.Clone(spans)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end.Before(byEnd[j].end) })
	// highest[i] is the span of the highest token among byEnd[:i+1].
	highest := make([]span, len(byEnd))
	for i, s := range byEnd {
		highest[i] = s
		if i > 0 && highest[i-1].token > s.token {
			highest[i] = highest[i-1]
		}
	}
	for _, s := range spans {
		n := sort.Search(len(byEnd), func(i int) bool { return !byEnd[i].end.Before(s.start) })
		if n == 0 {
			continue
		}
		h := highest[n-1]
		if h.token > s.token || (strict && h.token == s.token) {
			return h, s, true
		}
	}
	return span{}, span{}, false
}
