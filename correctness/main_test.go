package correctness_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	proc.Main(map[string]func() int{"candidate": candidateChild})
	if os.Getenv(childEnv) != "" {
		os.Exit(pausedChild())
	}
	os.Exit(redistest.Main(m))
}
