package election_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	proc.Main(map[string]func() int{"candidate": candidateChild})
	os.Exit(redistest.Main(m))
}
