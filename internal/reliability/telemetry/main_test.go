package telemetry_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
