package conformance_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/conformance"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestGoRedis: the default adapter passes the suite.
func TestGoRedis(t *testing.T) {
	conformance.Run(t, conformance.Adapter{
		Name: "go-redis",
		Single: func(t testing.TB, addr string) port.Conn {
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = c.Close() })
			return port.GoRedis(c)
		},
		Cluster: func(t testing.TB, addrs []string) port.Conn {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			t.Cleanup(func() { _ = c.Close() })
			return port.GoRedis(c)
		},
	})
}
