package rueidisconn_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/efficiency/rueidisconn"
	"github.com/leasekit/leasekit/internal/conformance"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// client is a rueidis client on addrs, with its defaults (client-side
// caching on, as a service has it), closed when t ends.
func client(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%v): %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestConformance: the rueidis adapter passes the suite.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Adapter{
		Name:    "rueidis",
		Single:  func(t testing.TB, addr string) port.Conn { return rueidisconn.New(client(t, addr)) },
		Cluster: func(t testing.TB, addrs []string) port.Conn { return rueidisconn.New(client(t, addrs...)) },
	})
}
