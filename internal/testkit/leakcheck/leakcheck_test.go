package leakcheck_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/leakcheck"
)

// leakEnv makes TestMain leave a goroutine behind, for
// TestMainFailsALeakyRun to see the run fail.
const leakEnv = "LEASEKIT_LEAKCHECK_LEAK"

func TestMain(m *testing.M) {
	if os.Getenv(leakEnv) == "1" {
		go leakedForever(make(chan struct{}))
	}
	os.Exit(leakcheck.Main(m))
}

// leakedForever blocks until stop is closed: a goroutine a test forgot.
func leakedForever(stop chan struct{}) { <-stop }

// TestFindNamesALeak: a goroutine still blocked when the wait is over is
// reported with its stack; once it has ended, Find returns nil.
func TestFindNamesALeak(t *testing.T) {
	stop := make(chan struct{})
	go leakedForever(stop)
	err := leakcheck.Find(50 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "leakcheck_test.leakedForever") {
		t.Fatalf("a goroutine blocked on a channel: got %v, want an error with its stack", err)
	}
	close(stop)
	if err := leakcheck.Find(5 * time.Second); err != nil {
		t.Fatalf("after it ended: got %v, want nil", err)
	}
}

// TestFindWaitsForAGoroutineOnItsWayOut: a goroutine that ends within the
// wait is no leak.
func TestFindWaitsForAGoroutineOnItsWayOut(t *testing.T) {
	go time.Sleep(100 * time.Millisecond)
	if err := leakcheck.Find(5 * time.Second); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
}

// TestMainFailsALeakyRun: a test binary whose tests pass but leave a
// goroutine behind exits 1, and says which goroutine it was.
func TestMainFailsALeakyRun(t *testing.T) {
	if os.Getenv(leakEnv) == "1" {
		return // the child, whose tests must pass for Main to look
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestMainFailsALeakyRun$")
	cmd.Env = append(os.Environ(), leakEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("a run that leaked: got %v, want exit status 1; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "leakcheck: goroutines still running after "+leakcheck.Within.String()+": 1") || !strings.Contains(string(out), "leakcheck_test.leakedForever") {
		t.Fatalf("output: got\n%s\nwant the leaked goroutine's stack", out)
	}
}
