package processes_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// locker is one kind of Locker seen through what these tests need: a grant's
// token (0 for efficiency), its deadline and its release.
type locker interface {
	acquire(ctx context.Context, name string, ttl time.Duration) (grant, error)
	close()
}

type grant interface {
	Token() uint64
	Deadline() time.Time
	Release(ctx context.Context) error
}

type efficiencyGrant struct{ *efficiency.Lock }

func (efficiencyGrant) Token() uint64 { return 0 }

type efficiencyLocker struct{ *efficiency.Locker }

func (l efficiencyLocker) acquire(ctx context.Context, name string, ttl time.Duration) (grant, error) {
	lock, err := l.Obtain(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	return efficiencyGrant{lock}, nil
}

func (l efficiencyLocker) close() { _ = l.Close() }

type correctnessLocker struct{ *correctness.Locker }

func (l correctnessLocker) acquire(ctx context.Context, name string, ttl time.Duration) (grant, error) {
	lease, err := l.Acquire(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	return lease, nil
}

func (l correctnessLocker) close() { _ = l.Close() }

// semaphoreLocker takes permits of the semaphores of limit permits: a
// permit is an efficiency grant.
type semaphoreLocker struct {
	*efficiency.Locker
	limit int
}

func (l semaphoreLocker) acquire(ctx context.Context, name string, ttl time.Duration) (grant, error) {
	lock, err := l.Semaphore(name, l.limit).Acquire(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return efficiencyGrant{lock}, nil
}

func (l semaphoreLocker) close() { _ = l.Close() }

// newLocker returns a Locker of kind ("efficiency", "correctness", or
// "semaphore-N" for the permits of semaphores of N) on client whose owner
// ids are recorded in owners.
func newLocker(kind string, client redis.UniversalClient, owners *ownerLog) locker {
	if n, ok := semaphoreLimit(kind); ok {
		return semaphoreLocker{efficiency.New(client, efficiency.WithOwnerSource(owners)), n}
	}
	if kind == "efficiency" {
		return efficiencyLocker{efficiency.New(client, efficiency.WithOwnerSource(owners))}
	}
	return correctnessLocker{correctness.New(client, correctness.WithOwnerSource(owners), correctness.WithAudit(false))}
}

// semaphoreLimit is the limit of a kind "semaphore-N".
func semaphoreLimit(kind string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(kind, "semaphore-"))
	return n, err == nil && strings.HasPrefix(kind, "semaphore-")
}

// ownerLog is an owner source that draws from crypto/rand and remembers the
// last owner id it made, so that a test process can tell its own grant in
// the lock key. Owner ids are secrets: it never prints one.
type ownerLog struct {
	mu   sync.Mutex
	last string
}

func (o *ownerLog) Read(p []byte) (int, error) {
	n, err := io.ReadFull(rand.Reader, p)
	o.mu.Lock()
	o.last = base64.RawURLEncoding.EncodeToString(p[:n])
	o.mu.Unlock()
	return n, err
}

func (o *ownerLog) owner() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// holds reports whether the lock value v (as GET returns it, perhaps with
// the mark of waiters: scripts/wire.go) is the grant of owner with
// token (0 for efficiency).
func holds(v, owner string, token uint64) bool {
	v = scripts.Grant(v)
	if token == 0 {
		return v == owner
	}
	return v == owner+":"+strconv.FormatUint(token, 10)
}

// lockKey is the Redis key of the lock called name with the default prefix.
func lockKey(name string) string { return "leasekit:{" + name + "}" }

// checkHeld reports whether, right after an acquire returned g, the server
// holds g for owner: "held", "lost" when it does not but the lease's deadline
// had passed by the time the answer came (a pause after the acquire, not a
// double grant), or "NOT HELD" with what the key holds.
func checkHeld(ctx context.Context, c redis.UniversalClient, name, owner string, g grant) string {
	v, err := c.Get(ctx, lockKey(name)).Result()
	switch {
	case err == nil && holds(v, owner, g.Token()):
		return "held"
	case !time.Now().Before(g.Deadline()):
		return "lost"
	case err == redis.Nil:
		return "NOT HELD: the key is gone"
	case err != nil:
		return "unknown: " + err.Error()
	}
	return fmt.Sprintf("NOT HELD: the key holds another grant (token %s)", tokenOf(v))
}

// tokenOf is the token in a lock value, or "-" for an efficiency value.
func tokenOf(v string) string {
	v = scripts.Grant(v)
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		return v[i+1:]
	}
	return "-"
}

// lines returns the lines read from stdin, and is closed at its end.
func lines() <-chan string {
	c := make(chan string)
	go func() {
		defer close(c)
		s := bufio.NewScanner(os.Stdin)
		for s.Scan() {
			c <- s.Text()
		}
	}()
	return c
}
