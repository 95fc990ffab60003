package correctness_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(pausedChild())
	}
	os.Exit(redistest.Main(m))
}
