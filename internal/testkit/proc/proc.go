// Package proc runs the test binary again as a child process, for tests whose
// behaviour depends on a real process: one that SIGSTOP freezes whole (its
// timers and its sockets' readers alike), or that kill -9 ends without a
// word.
package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RoleEnv names the role a re-executed test binary plays; Main reads it.
const RoleEnv = "LEASEKIT_CHILD_ROLE"

// Main runs the child role named by RoleEnv, if any, and exits with its
// status; otherwise it returns, and TestMain goes on to run the tests.
func Main(roles map[string]func() int) {
	role := os.Getenv(RoleEnv)
	if role == "" {
		return
	}
	run, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "proc: unknown child role %q\n", role)
		os.Exit(2)
	}
	os.Exit(run())
}

// Child is a running copy of the test binary.
type Child struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// Start runs the test binary as a child in role, with env added to its
// environment. It is killed when the test ends, if still running.
func Start(t testing.TB, role string, env ...string) *Child {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), RoleEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 64)}
	go func() {
		defer close(c.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			c.lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Lines is the child's output, line by line; it is closed when the output
// ends. A test that reads it does not also call Line.
func (c *Child) Lines() <-chan string { return c.lines }

// Kill ends the child with SIGKILL and waits for it.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// Line waits up to d for the child's next line of output and returns it;
// the test fails when none comes.
func (c *Child) Line(d time.Duration) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("child %d: output ended", c.Pid())
		}
		return l
	case <-time.After(d):
		c.t.Fatalf("child %d: no line within %v", c.Pid(), d)
	}
	return ""
}

// Send writes a line to the child's stdin.
func (c *Child) Send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatalf("child %d: stdin: %v", c.Pid(), err)
	}
}

// Stop freezes the child with SIGSTOP and waits until every thread of it has
// stopped.
func (c *Child) Stop() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
	if err := AwaitStopped(c.Pid(), 10*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// Continue resumes a stopped child with SIGCONT.
func (c *Child) Continue() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatal(err)
	}
}

// Close closes the child's stdin.
func (c *Child) Close() { _ = c.stdin.Close() }

// Wait waits for the child to exit and returns its exit error.
func (c *Child) Wait() error { return c.cmd.Wait() }

// AwaitStopped waits up to d until every thread of pid is stopped: SIGSTOP is
// delivered asynchronously.
func AwaitStopped(pid int, d time.Duration) error {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(stats) > 0
		for _, p := range stats {
			b, err := os.ReadFile(p)
			// The state follows the parenthesised command name.
			if i := strings.LastIndexByte(string(b), ')'); err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
				break
			}
		}
		if stopped {
			return nil
		}
	}
	return fmt.Errorf("process %d did not stop within %v", pid, d)
}
