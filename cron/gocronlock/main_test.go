package gocronlock_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	proc.Main(map[string]func() int{"scheduler": schedulerChild})
	os.Exit(redistest.Main(m))
}
