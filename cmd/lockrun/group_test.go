package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
)

// worker is a shell command that starts a grandchild of lockrun: it writes
// its pid to the file called pidFile (renamed into place, so that it is never
// read half written), then becomes a sleep with that pid.
func worker(pidFile string) string {
	return `sh -c 'echo $$ > "$1.new" && mv "$1.new" "$1" && exec sleep 38' worker ` + pidFile
}

func TestLostLeaseStopsTheWholeGroup(t *testing.T) {
	t.Parallel()
	requireProc(t)
	h := newHarness(t)
	const pidFile = "worker.pid"
	for _, tc := range []struct {
		name, script string
	}{
		{"worker-in-the-foreground", worker(pidFile) + `; echo done`},
		{"worker-in-a-pipeline", worker(pidFile) + ` | cat`},
		{"worker-in-the-background", worker(pidFile) + ` & wait`},
		{"shell-ignoring-SIGTERM", `trap "" TERM; ` + worker(pidFile)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := h.with(t)
			h.dir = t.TempDir()
			p := h.start(nil, "-ttl", "1s", "-grace", "200ms", tc.name, "--", "sh", "-c", tc.script)
			pid := h.pidIn(pidFile)
			if err := h.client.Del(t.Context(), scripts.LockKey(lease.DefaultPrefix, tc.name)).Err(); err != nil {
				t.Fatal(err)
			}
			wantCode(t, p.wait(t), exitLost)
			if running(pid) {
				t.Fatalf("the worker (pid %d) still runs after lockrun exited", pid)
			}
		})
	}
}

func TestSignalsReachTheWholeGroup(t *testing.T) {
	t.Parallel()
	requireProc(t)
	h := newHarness(t)
	// The leader traps SIGTERM, so only a SIGTERM sent to the whole group
	// ends the worker, which the leader waits for.
	const script = `trap 'echo leader >> got' TERM
sh -c 'trap "echo worker >> got; exit 0" TERM; echo $$ > worker.new; mv worker.new worker.pid
	while :; do sleep 0.02; done'
echo after >> got`
	p := h.start(nil, "signalled", "--", "sh", "-c", script)
	h.pidIn("worker.pid")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantCode(t, p.wait(t), 0)
	b, err := os.ReadFile(filepath.Join(h.dir, "got"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	slices.Sort(got)
	if want := []string{"after", "leader", "worker"}; !slices.Equal(got, want) {
		t.Errorf("the command recorded %q, want %q, in any order", got, want)
	}
}

func TestLeftoverProcessesStopBeforeRelease(t *testing.T) {
	t.Parallel()
	requireProc(t)
	h := newHarness(t)
	// The leader exits at once, leaving a member that, on SIGTERM, creates
	// the file term and then waits for the file release.
	const script = `sh -c 'trap "touch term; while [ ! -e release ]; do sleep 0.02; done; exit 0" TERM
	echo $$ > member.new; mv member.new member.pid; while :; do sleep 0.02; done' &
while [ ! -e member.pid ]; do sleep 0.02; done; exit 0`
	p := h.start(nil, "-grace", hang.String(), "leftover", "--", "sh", "-c", script)
	pid := h.pidIn("member.pid")
	h.waitFile("term")
	key := scripts.LockKey(lease.DefaultPrefix, "leftover")
	if n, err := h.client.Exists(t.Context(), key).Result(); err != nil || n != 1 {
		t.Fatalf("while a member of the group runs, EXISTS %s: got %d, %v, want 1 (the lock held)", key, n, err)
	}
	h.touch("release")
	r := p.wait(t)
	wantCode(t, r, 0)
	if !strings.Contains(r.stderr, "leaving processes in its group") {
		t.Errorf("stderr: got %q, want it to say the command left processes", r.stderr)
	}
	if running(pid) {
		t.Errorf("the member (pid %d) still runs after lockrun exited", pid)
	}
	if n, err := h.client.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Errorf("after lockrun exited, EXISTS %s: got %d, %v, want 0 (released)", key, n, err)
	}
}

// pidIn waits for the command to write a pid to the file called name, and
// returns it. The process is killed when the test ends if it still runs: a
// test that fails must not leave it behind.
func (h *harness) pidIn(name string) int {
	h.t.Helper()
	h.waitFile(name)
	b, err := os.ReadFile(filepath.Join(h.dir, name))
	if err != nil {
		h.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	h.t.Cleanup(func() {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// requireProc skips a test that needs /proc to tell whether a process runs.
func requireProc(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
}

// running reports whether process pid exists and has not exited. An exited
// process that nobody has reaped yet (a zombie) does not run.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}
