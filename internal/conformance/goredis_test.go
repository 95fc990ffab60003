package conformance_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/conformance"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/redis/go-redis/v9"
)

// goRedis is the default adapter: a Client on one server, a ClusterClient
// on several.
var goRedis = conformance.Adapter{
	Name: "go-redis",
	Dial: func(addrs ...string) (port.Conn, func(), error) {
		var c redis.UniversalClient
		if len(addrs) > 1 {
			c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		} else {
			c = redis.NewClient(&redis.Options{Addr: addrs[0]})
		}
		return port.GoRedis(c), func() { _ = c.Close() }, nil
	},
}

func TestMain(m *testing.M) { os.Exit(conformance.Main(m, goRedis)) }

// TestGoRedis: the default adapter passes the suite.
func TestGoRedis(t *testing.T) { conformance.Run(t, goRedis) }
