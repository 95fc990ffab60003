package redistest

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

//go:embed testdata/clockshim.c
var clockShimSrc []byte

// Clock is the wall clock of a redis-server started by StartWithClock: Step
// moves it as an NTP step would, for that server alone (its monotonic
// clock, and the machine's, stay as they are). Every TIME a script reads,
// and every key's expiry, follows it.
type Clock struct {
	file   string
	offset time.Duration
}

// Step moves the server's wall clock by d, forward or back.
func (c *Clock) Step(t testing.TB, d time.Duration) {
	t.Helper()
	c.offset += d
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(c.offset.Microseconds()))
	f, err := os.OpenFile(c.file, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteAt(b[:], 0)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatalf("redistest: stepping the server clock: %v", err)
	}
}

// StartWithClock is Start, for a server whose wall clock the test steps: it
// runs with a preloaded library (testdata/clockshim.c, built once per test
// binary with the machine's C compiler) that adds the Clock's offset to
// it. Without a C compiler the test skips, or fails under RequireEnv.
func StartWithClock(t testing.TB, args ...string) (*Server, *Clock) {
	t.Helper()
	RequireBinary(t)
	lib, err := clockShim()
	if err != nil {
		msg := fmt.Sprintf("redistest: cannot build the clock shim (a C compiler is needed: Debian's gcc): %v", err)
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	c := &Clock{file: filepath.Join(t.TempDir(), "clock")}
	if err := os.WriteFile(c.file, make([]byte, 8), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := startWith([]string{"LD_PRELOAD=" + lib, "CLOCKSHIM_FILE=" + c.file}, args...)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s, c
}

var shim struct {
	once sync.Once
	lib  string
	err  error
}

// clockShim builds the clock shim once, and returns the library's path.
func clockShim() (string, error) {
	shim.once.Do(func() {
		dir, err := os.MkdirTemp("", "leasekit-clockshim-")
		if err != nil {
			shim.err = err
			return
		}
		src, lib := filepath.Join(dir, "clockshim.c"), filepath.Join(dir, "clockshim.so")
		if err := os.WriteFile(src, clockShimSrc, 0o644); err != nil {
			shim.err = err
			return
		}
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl").CombinedOutput()
		if err != nil {
			shim.err = fmt.Errorf("%s: %w: %s", cc, err, out)
			return
		}
		shim.lib = lib
	})
	return shim.lib, shim.err
}
