package fencesql_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
