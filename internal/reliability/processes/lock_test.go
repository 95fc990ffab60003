package processes_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/chaos"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// locker, grant and ownerLog are package chaos's, whose worker processes
// these tests share.
type (
	locker   = chaos.Locker
	grant    = chaos.Grant
	ownerLog = chaos.OwnerLog
)

// newLocker returns a Locker of kind ("efficiency", "correctness", or
// "semaphore-N" for the permits of semaphores of N) on client whose owner
// ids are recorded in owners.
func newLocker(kind string, client redis.UniversalClient, owners *ownerLog) locker {
	return chaos.NewLocker(kind, port.GoRedis(client), owners)
}

// semaphoreLimit is the limit of a kind "semaphore-N".
func semaphoreLimit(kind string) (int, bool) { return chaos.SemaphoreLimit(kind) }

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
