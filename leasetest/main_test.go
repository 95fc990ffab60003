package leasetest_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/leakcheck"
)

// Every Env, Locker and client a test opens must be closed by its end.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
