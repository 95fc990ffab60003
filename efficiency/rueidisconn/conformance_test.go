package rueidisconn_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/efficiency/rueidisconn"
	"github.com/leasekit/leasekit/internal/conformance"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/redis/rueidis"
)

// adapter is a rueidis client on addrs with its defaults (client-side
// caching on, as a service has it).
var adapter = conformance.Adapter{
	Name: "rueidis",
	Dial: func(addrs ...string) (port.Conn, func(), error) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
		if err != nil {
			return nil, nil, err
		}
		return rueidisconn.New(c), c.Close, nil
	},
}

func TestMain(m *testing.M) { os.Exit(conformance.Main(m, adapter)) }

// TestConformance: the rueidis adapter passes the suite.
func TestConformance(t *testing.T) { conformance.Run(t, adapter) }
