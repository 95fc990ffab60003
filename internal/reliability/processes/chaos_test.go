package processes_test

import (
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/chaos"
	"github.com/redis/go-redis/v9"
)

// dialGoRedis is the chaos workers' Conn: the default go-redis adapter, as
// efficiency.New and correctness.New make it.
func dialGoRedis(addr string) (port.Conn, func(), error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	return port.GoRedis(c), func() { _ = c.Close() }, nil
}

// TestNoDoubleGrantUnderChaos runs worker processes on one lock while a
// nemesis freezes them (waiting or holding) past their ttl and resumes
// them, kills them with -9 and starts new ones, and restarts the lock's
// server without persistence (package chaos). Every acquire that returns
// must hold the lock on the server at that moment, and no two grants may be
// live at once; for a semaphore of 2, no more than two permits or holders.
// LEASEKIT_CHAOS sets how long each kind runs (default 8s of pauses and
// kills, then as long with restarts too). The client adapters run the same
// test, shorter, in the conformance suite.
func TestNoDoubleGrantUnderChaos(t *testing.T) {
	d := chaos.Duration(t, 8*time.Second)
	for _, kind := range chaos.Kinds {
		t.Run(kind, func(t *testing.T) { chaos.Run(t, kind, d) })
	}
}
