package leasetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Env, Locker and client a test opens must be closed by its end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
