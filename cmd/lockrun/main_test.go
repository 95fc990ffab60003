package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// binDir holds the lockrun binary the tests drive.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockrun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := redistest.Main(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var build struct {
	once sync.Once
	path string
	err  error
}

// binary builds lockrun once per test run (with the race detector when the
// tests have it) and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		path := filepath.Join(binDir, "lockrun")
		args := []string{"build", "-o", path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
		build.path = path
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}
