package processes_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/chaos"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	proc.Main(map[string]func() int{
		"waiter":   waiterChild,
		"give-up":  giveUpChild,
		"serve":    serveChild,
		chaos.Role: chaos.Worker(dialGoRedis),
		"hold":     holdChild,
		"line":     lineChild,
		"features": featuresChild,
		"frozen":   frozenChild,
		"seams":    seamsChild,
		"etcd":     etcdWorkerChild,
	})
	os.Exit(redistest.Main(m))
}
