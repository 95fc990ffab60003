// Package chaos is the process chaos test of leasekit's locks, for any client
// adapter: worker processes take one lock (or permits of one semaphore) again
// and again while a nemesis freezes them with SIGSTOP past their ttl, kills
// them with -9 and starts new ones, and restarts the server without
// persistence. Every grant is checked on the server as soon as its acquire
// returns. The workers are the test binary run again (package proc): its
// TestMain registers Worker under Role.
package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Kinds are the kinds of lock Run takes: "semaphore-N" is the permits of
// semaphores of N.
var Kinds = []string{"efficiency", "correctness", "semaphore-2"}

// Locker is one kind of Locker seen through what the tests need: a grant's
// token (0 for efficiency), its deadline and its release.
type Locker interface {
	Acquire(ctx context.Context, name string, ttl time.Duration) (Grant, error)
	Close()
}

// Grant is a granted lock or permit.
type Grant interface {
	Token() uint64
	Deadline() time.Time
	Release(ctx context.Context) error
}

type efficiencyGrant struct{ *efficiency.Lock }

func (efficiencyGrant) Token() uint64 { return 0 }

type efficiencyLocker struct{ l *efficiency.Locker }

func (l efficiencyLocker) Acquire(ctx context.Context, name string, ttl time.Duration) (Grant, error) {
	lock, err := l.l.Obtain(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	return efficiencyGrant{lock}, nil
}

func (l efficiencyLocker) Close() { _ = l.l.Close() }

type correctnessLocker struct{ l *correctness.Locker }

func (l correctnessLocker) Acquire(ctx context.Context, name string, ttl time.Duration) (Grant, error) {
	lease, err := l.l.Acquire(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	return lease, nil
}

func (l correctnessLocker) Close() { _ = l.l.Close() }

// semaphoreLocker takes permits of the semaphores of limit permits: a
// permit is an efficiency grant.
type semaphoreLocker struct {
	l     *efficiency.Locker
	limit int
}

func (l semaphoreLocker) Acquire(ctx context.Context, name string, ttl time.Duration) (Grant, error) {
	lock, err := l.l.Semaphore(name, l.limit).Acquire(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return efficiencyGrant{lock}, nil
}

func (l semaphoreLocker) Close() { _ = l.l.Close() }

// NewLocker returns a Locker of kind ("efficiency", "correctness", or
// "semaphore-N") on conn, through the faces a user calls, whose owner ids
// are recorded in owners.
func NewLocker(kind string, conn port.Conn, owners *OwnerLog) Locker {
	if n, ok := SemaphoreLimit(kind); ok {
		return semaphoreLocker{efficiency.NewConn(conn, efficiency.WithOwnerSource(owners)), n}
	}
	if kind == "efficiency" {
		return efficiencyLocker{efficiency.NewConn(conn, efficiency.WithOwnerSource(owners))}
	}
	return correctnessLocker{correctness.NewConn(conn, correctness.WithOwnerSource(owners), correctness.WithAudit(false))}
}

// SemaphoreLimit is the limit of a kind "semaphore-N".
func SemaphoreLimit(kind string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(kind, "semaphore-"))
	return n, err == nil && strings.HasPrefix(kind, "semaphore-")
}

// OwnerLog is an owner source that draws from crypto/rand and remembers the
// last owner id it made, so that a test process can tell its own grant in
// the lock key. Owner ids are secrets: it never prints one.
type OwnerLog struct {
	mu   sync.Mutex
	last string
}

func (o *OwnerLog) Read(p []byte) (int, error) {
	n, err := io.ReadFull(rand.Reader, p)
	o.mu.Lock()
	o.last = base64.RawURLEncoding.EncodeToString(p[:n])
	o.mu.Unlock()
	return n, err
}

// Owner is the last owner id drawn.
func (o *OwnerLog) Owner() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// checkGrant runs on the server, as soon as an acquire returns: it reports
// whether the lock holds the caller's grant, and whether another grant's
// record is still live; if all is well it records the caller's grant, to
// expire with it. A record is cleared by its holder before it releases, so
// a live record of another grant means two grants live at once. The epoch
// key changes with every restart of the server (which loses grants without
// a double grant): a check across one reports "restart".
//
// KEYS: lock, record, epoch. ARGV: the grant's value, the epoch read before
// the acquire. Reply: {"held"}, {"restart"}, {"gone"}, {"other"}, {"overlap"}.
var checkGrant = redis.NewScript(`
local epoch = redis.call('GET', KEYS[3])
if not epoch or epoch ~= ARGV[2] then
  return {'restart'}
end
local v = redis.call('GET', KEYS[1])
if not v then
  return {'gone'}
end
-- The mark of waiters carries the lease's expiry, which lapses once the
-- clock in ms reaches it (the key outlives it): the record then expires
-- at the same ms (PXAT expiry - 1: Redis expires a key once past its time).
local ttl, expiry = redis.call('PTTL', KEYS[1]), nil
local star = string.find(v, '*', 1, true)
if star then
  expiry = tonumber(string.sub(v, star + 1))
  v = string.sub(v, 1, star - 1)
  if expiry then
    local now = redis.call('TIME')
    if expiry <= tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) then
      return {'gone'}
    end
  end
end
if v ~= ARGV[1] then
  return {'other'}
end
local prev = redis.call('GET', KEYS[2])
if prev and prev ~= ARGV[1] then
  return {'overlap'}
end
if expiry then
  redis.call('SET', KEYS[2], ARGV[1], 'PXAT', expiry - 1)
elseif ttl > 0 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
end
return {'held'}
`)

// clearRecord deletes the caller's record of its grant. KEYS: record.
// ARGV: the grant's value.
var clearRecord = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 1
`)

// checkPermit is checkGrant for a permit of a semaphore: it reports whether
// the caller holds a live permit, and whether more than the limit of
// permits, or of records of holders, are live; if all is well it records
// the caller's permit, to expire with it. A holder clears its record before
// it releases, so more live records than the limit means more holders at
// once than the limit.
//
// KEYS: permits, records (a sorted set of owners by their permit's expiry),
// epoch. ARGV: the owner, the epoch read before the acquire, the limit.
// Reply as checkGrant's.
var checkPermit = redis.NewScript(`
local epoch = redis.call('GET', KEYS[3])
if not epoch or epoch ~= ARGV[2] then
  return {'restart'}
end
local now = redis.call('TIME')
local ms = string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= tonumber(ms) then
  return {'gone'}
end
if redis.call('ZCOUNT', KEYS[1], '(' .. ms, '+inf') > tonumber(ARGV[3]) then
  return {'overlap'}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
redis.call('ZADD', KEYS[2], expiry, ARGV[1])
if redis.call('ZCARD', KEYS[2]) > tonumber(ARGV[3]) then
  return {'overlap'}
end
return {'held'}
`)

// clearPermit deletes the caller's record of its permit. KEYS: records.
// ARGV: the owner.
var clearPermit = redis.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)

// checker checks a grant on the server as soon as its acquire returns, and
// clears its record before its release: checkGrant and clearRecord for a
// lock, checkPermit and clearPermit for a permit.
type checker struct {
	check, clear *redis.Script
	keys         []string // the check's; the record's is keys[1]
	limit        []any    // the check's last ARGV, if any
}

func newChecker(kind, name string) checker {
	if n, ok := SemaphoreLimit(kind); ok {
		permits := scripts.PermitsKey(scripts.DefaultPrefix, name)
		return checker{checkPermit, clearPermit, []string{permits, permits + ":record", "epoch"}, []any{n}}
	}
	lock := scripts.LockKey(scripts.DefaultPrefix, name)
	return checker{checkGrant, clearRecord, []string{lock, lock + ":record", "epoch"}, nil}
}

// Role is the child role the test binary's TestMain runs Worker under.
const Role = "chaos-worker"

// workerEnv carries a worker's "addr kind name ttl".
const workerEnv = "LEASEKIT_CHAOS_WORKER"

// Dial makes a Conn on a client of the server at addr, and the func that
// closes the client.
type Dial func(addr string) (port.Conn, func(), error)

// Worker is a worker process's main, its locks on Conns of dial: it takes
// one lock, or a permit of one semaphore, again and again; each acquire
// that returns is checked on the server at once (through a go-redis client
// of the harness's), held for a few milliseconds, and released. It reports
// "acquired TOKEN STATUS" for each, where STATUS is the check's, or "late"
// when the check's reply came after the lease's deadline (a pause after the
// acquire, which proves nothing); and "error ..." for an acquire that
// failed.
func Worker(dial Dial) func() int {
	return func() int {
		f := strings.Fields(os.Getenv(workerEnv))
		if len(f) != 4 {
			fmt.Fprintf(os.Stderr, "chaos: %s=%q: want \"addr kind name ttl\"\n", workerEnv, os.Getenv(workerEnv))
			return 2
		}
		addr, kind, name := f[0], f[1], f[2]
		ttl, err := time.ParseDuration(f[3])
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: ttl: %v\n", err)
			return 2
		}
		// A client that dials as it is made (rueidis) fails while the
		// nemesis restarts the server: a new worker tries again, as a
		// service's supervisor would start it again.
		conn, closeConn, err := dial(addr)
		for tries := 1; err != nil; tries++ {
			if tries == 100 {
				fmt.Fprintf(os.Stderr, "chaos: dial %s: %v\n", addr, err)
				return 2
			}
			time.Sleep(50 * time.Millisecond)
			conn, closeConn, err = dial(addr)
		}
		defer closeConn()
		client := redis.NewClient(&redis.Options{Addr: addr})
		defer client.Close()
		owners := &OwnerLog{}
		l := NewLocker(kind, conn, owners)
		defer l.Close()
		bg := context.Background()
		ck := newChecker(kind, name)
		for {
			epoch := client.Get(bg, "epoch").Val()
			ctx, cancel := context.WithTimeout(bg, 5*time.Second)
			g, err := l.Acquire(ctx, name, ttl)
			cancel()
			if err != nil {
				fmt.Println("error", err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			value := owners.Owner()
			if g.Token() != 0 {
				value = fmt.Sprintf("%s:%d", value, g.Token())
			}
			status, err := ck.check.Run(bg, client, ck.keys, append([]any{value, epoch}, ck.limit...)...).StringSlice()
			switch {
			case err != nil:
				status = []string{"unknown"}
			case !time.Now().Before(g.Deadline()):
				status = []string{"late"}
			}
			fmt.Println("acquired", g.Token(), status[0])
			time.Sleep(time.Duration(mrand.IntN(20)) * time.Millisecond)
			ck.clear.Run(bg, client, ck.keys[1:2], value)
			_ = g.Release(bg)
		}
	}
}

// Duration is how long each kind runs in each phase: LEASEKIT_CHAOS if set,
// else def.
func Duration(t testing.TB, def time.Duration) time.Duration {
	v := os.Getenv("LEASEKIT_CHAOS")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("LEASEKIT_CHAOS=%q: %v", v, err)
	}
	return d
}

// tally counts what the workers reported.
type tally struct {
	mu       sync.Mutex
	statuses map[string]int
	errors   int
	bad      []string
}

func (ty *tally) read(lines <-chan string) {
	for l := range lines {
		ty.mu.Lock()
		switch f := strings.Fields(l); {
		case len(f) == 3 && f[0] == "acquired":
			ty.statuses[f[2]]++
			if f[2] == "other" || f[2] == "gone" || f[2] == "overlap" {
				ty.bad = append(ty.bad, l)
			}
		case len(f) > 0 && f[0] == "error":
			ty.errors++
		}
		ty.mu.Unlock()
	}
}

// Run runs worker processes on one lock of kind on a real redis-server of
// its own, for d of pauses and kills and then as long with restarts too.
// Every acquire that returns must hold the lock on the server at that
// moment, and no two grants may be live at once (checkGrant); for a
// semaphore of 2, no more than two permits or two holders' records
// (checkPermit). The test binary's TestMain must run Worker under Role.
func Run(t *testing.T, kind string, d time.Duration) {
	s := redistest.Start(t)
	admin := s.Client(t)
	ctx := t.Context()
	const name, ttl = "chaos", 300 * time.Millisecond
	workers := 4
	if _, ok := SemaphoreLimit(kind); ok {
		workers = 5 // two hold, three wait
	}
	epoch := 1
	admin.Set(ctx, "epoch", epoch, 0)
	ty := &tally{statuses: map[string]int{}}
	var readers sync.WaitGroup
	start := func() *proc.Child {
		c := proc.Start(t, Role, fmt.Sprintf("%s=%s %s %s %s", workerEnv, s.Addr, kind, name, ttl))
		readers.Go(func() { ty.read(c.Lines()) })
		return c
	}
	procs := make([]*proc.Child, workers)
	for i := range procs {
		procs[i] = start()
	}
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var pauses, kills, restarts int
	end, restartFrom := time.Now().Add(2*d), time.Now().Add(d)
	nextRestart := restartFrom
	for time.Now().Before(end) {
		time.Sleep(time.Duration(20+rng.IntN(150)) * time.Millisecond)
		i := rng.IntN(workers)
		switch {
		case time.Now().After(nextRestart):
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
			epoch++
			admin.Set(ctx, "epoch", epoch, 0)
			restarts++
			nextRestart = time.Now().Add(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
		case rng.IntN(4) == 0:
			procs[i].Kill()
			procs[i] = start()
			kills++
		default:
			// Frozen for up to three ttls: past its lease, or its place
			// in the queue, or neither.
			procs[i].Stop()
			time.Sleep(time.Duration(rng.IntN(int(3*ttl/time.Millisecond))) * time.Millisecond)
			procs[i].Continue()
			pauses++
		}
	}
	for _, c := range procs {
		c.Kill()
	}
	readers.Wait()
	t.Logf("%s: %d pauses, %d kills -9, %d restarts; acquires: %v; failed acquires: %d",
		kind, pauses, kills, restarts, ty.statuses, ty.errors)
	if len(ty.bad) > 0 {
		t.Fatalf("%d acquires returned a grant the server did not hold, or while another was live: %v", len(ty.bad), ty.bad)
	}
	if ty.statuses["held"] < 20 {
		t.Fatalf("only %d acquires were checked holding the lock: the test proved little", ty.statuses["held"])
	}
}
