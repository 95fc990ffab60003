// Package leakcheck fails a test binary that leaves goroutines behind: every
// Locker, client and server a test opened must be closed by the end of the
// run. It reads the stacks runtime.Stack gives, so the tests need no module
// beyond the standard library for it.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Within is how long Main waits for the goroutines to end. A goroutine that
// a Close stopped may still be taking its last steps out; one still there
// after Within is a leak.
const Within = 5 * time.Second

// Main runs the tests and, when they passed, fails the run if goroutines
// are left after them (Find, waiting up to Within). It returns the exit
// code: os.Exit(leakcheck.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if code == 0 {
		if err := Find(Within); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	return code
}

// Find waits up to within for every goroutine but the caller's, the
// runtime's and the testing package's to end. It returns nil once they
// have, or an error listing the stacks of those still running.
func Find(within time.Duration) error {
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for {
		left := others()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutines still running after %v: %d\n\n%s",
				within, len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// others returns the stacks of the goroutines that are neither the caller
// nor a part of the runtime, os/signal or testing.
func others() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	// The caller's stack comes first, then one stack per goroutine, each
	// "goroutine N [state]:" and its frames, with blank lines between.
	stacks := strings.Split(strings.TrimSpace(string(buf)), "\n\n")
	var left []string
	for _, s := range stacks[1:] {
		if !ignored(s) {
			left = append(left, s)
		}
	}
	return left
}

// ignored reports whether the goroutine of stack s belongs to the runtime,
// os/signal or testing (goleak's default filters): not the tests' own.
func ignored(s string) bool {
	header, frames, _ := strings.Cut(s, "\n")
	state := header[strings.IndexByte(header, '[')+1:]
	first := function(frames)
	switch first {
	case "testing.RunTests", "testing.(*T).Run", "testing.(*T).Parallel",
		"testing.runFuzzing", "testing.runFuzzTests":
		return strings.HasPrefix(state, "chan receive")
	case "os/signal.signal_recv", "os/signal.loop", "runtime.ReadTrace":
		return true
	}
	if strings.HasPrefix(state, "syscall") && strings.Contains(frames, "runtime.goexit") {
		return true // cgo's
	}
	return strings.Contains(frames, "runtime.ensureSigM")
}

// function is the name of the function in the top frame of frames:
// "pkg.(*T).Method" of "pkg.(*T).Method(0xc000012345, ...)".
func function(frames string) string {
	line, _, _ := strings.Cut(frames, "\n")
	if i := strings.LastIndexByte(line, '('); i > 0 {
		return line[:i]
	}
	return line
}
