package rmw_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(work(cfg))
	}
	os.Exit(redistest.Main(m))
}
