package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// hang bounds every wait in these tests: a bound for a hung test, not a
// timing assertion.
const hang = 30 * time.Second

// harness runs the built lockrun against a dedicated redis-server, in a
// scratch directory that is the working directory of lockrun and its command.
type harness struct {
	t      *testing.T
	bin    string
	addr   string
	client *redis.Client
	dir    string
	env    []string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	bin := binary(t)
	s := redistest.Start(t)
	h := &harness{t: t, bin: bin, addr: s.Addr, client: s.Client(t), dir: t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEKIT_") {
			h.env = append(h.env, kv)
		}
	}
	// A race-enabled binary otherwise sleeps a second before it exits.
	h.env = append(h.env, redisURLEnv+"=redis://"+s.Addr, "GORACE=atexit_sleep_ms=0")
	return h
}

// with returns the harness for the subtest t.
func (h *harness) with(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

// proc is a running lockrun. Its output goes to files rather than pipes, so
// that a process the command leaves behind cannot keep the test waiting for
// the pipes to close after lockrun has exited.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *os.File
	done           chan struct{}
}

// result is how a lockrun ended.
type result struct {
	code           int
	stdout, stderr string
}

// start starts lockrun with args, and env appended to the harness's.
func (h *harness) start(env []string, args ...string) *proc {
	h.t.Helper()
	p := &proc{cmd: exec.Command(h.bin, args...), done: make(chan struct{})}
	p.cmd.Dir = h.dir
	p.cmd.Env = append(append([]string(nil), h.env...), env...)
	p.stdout, p.stderr = outputFile(h.t, "stdout"), outputFile(h.t, "stderr")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		h.t.Fatalf("starting lockrun: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	h.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for p to exit.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(hang):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("lockrun %q still running after %v; stderr:\n%s", p.cmd.Args[1:], hang, contents(t, p.stderr))
	}
	return result{code: p.cmd.ProcessState.ExitCode(), stdout: contents(t, p.stdout), stderr: contents(t, p.stderr)}
}

// outputFile returns a new file, outside the command's directory, for one of
// lockrun's outputs; it is closed when the test ends.
func outputFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// contents returns what has been written to f.
func contents(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run runs lockrun with args to its end.
func (h *harness) run(args ...string) result {
	h.t.Helper()
	return h.start(nil, args...).wait(h.t)
}

// waitFile waits until the command has created the file called name.
func (h *harness) waitFile(name string) {
	h.t.Helper()
	for deadline := time.Now().Add(hang); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(h.dir, name)); err == nil {
			return
		}
	}
	h.t.Fatalf("no file %s after %v", name, hang)
}

// touch creates the file called name.
func (h *harness) touch(name string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// wantNoFile checks that no command created the file called name.
func (h *harness) wantNoFile(name string) {
	h.t.Helper()
	if _, err := os.Stat(filepath.Join(h.dir, name)); !os.IsNotExist(err) {
		h.t.Errorf("the file %s exists: a command ran that should not have (stat: %v)", name, err)
	}
}

// lines counts the lines of the file called name (0 when it does not exist).
func (h *harness) lines(name string) int {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, name))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// wantRuns checks how many runs the commands recorded in the file runs.
func (h *harness) wantRuns(want int) {
	h.t.Helper()
	if got := h.lines("runs"); got != want {
		h.t.Fatalf("the command ran %d times, want %d", got, want)
	}
}

// blockingScript records a run in the file runs, creates the file started,
// and then waits until the file release exists.
const blockingScript = `echo ran >> runs; touch started; while [ ! -e release ]; do sleep 0.02; done`

func wantCode(t *testing.T, r result, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("exit status: got %d, want %d; stderr:\n%s", r.code, want, r.stderr)
	}
}

func TestRacingRunsOnlyOneRunsTheCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"efficiency", nil},
		{"fenced", []string{"-fenced"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			args := append(tc.flags, "race", "--", "sh", "-c", blockingScript)
			a, b := h.start(nil, args...), h.start(nil, args...)
			// The winner's command runs until release exists, so the first
			// lockrun to exit is the one that found the lock held.
			var first, second *proc
			select {
			case <-a.done:
				first, second = a, b
			case <-b.done:
				first, second = b, a
			case <-time.After(hang):
				t.Fatalf("neither lockrun exited within %v", hang)
			}
			r := first.wait(t)
			wantCode(t, r, exitNotObtained)
			if !strings.Contains(r.stderr, "held by another owner") {
				t.Errorf("loser's stderr: got %q, want it to say the lock is held", r.stderr)
			}
			h.touch("release")
			wantCode(t, second.wait(t), 0)
			h.wantRuns(1)
		})
	}
}

func TestOnceRunsOnceAcrossTenInvocations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	procs := make([]*proc, 10)
	for i := range procs {
		procs[i] = h.start(nil, "-once", "1m", "nightly", "--", "sh", "-c", "echo ran >> runs")
	}
	codes := map[int]int{}
	for _, p := range procs {
		r := p.wait(t)
		codes[r.code]++
		if r.code == exitNotObtained && !strings.Contains(r.stderr, "already ran in this period") {
			t.Errorf("skipped run's stderr: got %q, want it to say it already ran", r.stderr)
		}
	}
	if codes[0] != 1 || codes[exitNotObtained] != 9 {
		t.Fatalf("exit statuses: got %v, want one 0 and nine %d", codes, exitNotObtained)
	}
	h.wantRuns(1)
	// The key outlives the run, so a late invocation in the period skips.
	wantCode(t, h.run("-once", "1m", "nightly", "--", "sh", "-c", "echo ran >> runs"), exitNotObtained)
}

func TestLostLeaseStopsTheCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, trap, stdout string
		// grace is -grace: for a command that exits on SIGTERM, longer than
		// any loaded machine takes to run its trap, so that the test does
		// not race the SIGKILL.
		grace string
	}{
		{"command exits on SIGTERM", `trap 'echo got-term; exit 0' TERM`, "got-term", (hang / 2).String()},
		{"command ignoring SIGTERM is killed", `trap '' TERM`, "", "200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			script := tc.trap + `; touch started; while :; do sleep 0.02; done`
			p := h.start(nil, "-ttl", "1s", "-grace", tc.grace, "lost", "--", "sh", "-c", script)
			h.waitFile("started")
			if err := h.client.Del(t.Context(), scripts.LockKey(lease.DefaultPrefix, "lost")).Err(); err != nil {
				t.Fatal(err)
			}
			r := p.wait(t)
			wantCode(t, r, exitLost)
			if !strings.Contains(r.stderr, "was lost") || !strings.Contains(r.stderr, "SIGTERM") {
				t.Errorf("stderr: got %q, want it to say the lock was lost and SIGTERM sent", r.stderr)
			}
			if !strings.Contains(r.stdout, tc.stdout) {
				t.Errorf("stdout: got %q, want %q", r.stdout, tc.stdout)
			}
		})
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	held := scripts.LockKey(lease.DefaultPrefix, "held")
	if err := h.client.Set(t.Context(), held, "someone-else", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	closed := closedPort(t)
	// Commands that exist but cannot be executed.
	for _, f := range []struct {
		name, text string
		mode       os.FileMode
	}{
		{"not-executable", "#!/bin/sh\ntouch ran\n", 0o644},
		{"bad-interpreter", "#!/lockrun-test/no/such/sh\ntouch ran\n", 0o755},
	} {
		if err := os.WriteFile(filepath.Join(h.dir, f.name), []byte(f.text), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		args   []string
		want   int
		stderr string // a part of stderr
	}{
		{"command's status", []string{"a", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"command killed by a signal", []string{"b", "--", "sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"command not found", []string{"c", "--", "lockrun-test-no-such-command"}, exitNotFound, "cannot run"},
		{"command path not found", []string{"c2", "--", "./lockrun-test-no-such-command"}, exitNotFound, "cannot run"},
		{"command path in no directory", []string{"c3", "--", "./no-such-dir/command"}, exitNotFound, "cannot run"},
		{"command is a directory", []string{"d", "--", "./"}, exitCannotRun, "cannot run"},
		{"command not executable", []string{"d2", "--", "./not-executable"}, exitCannotRun, "cannot run"},
		{"command's interpreter missing", []string{"d3", "--", "./bad-interpreter"}, exitCannotRun, "cannot run"},
		{"lock held", []string{"held", "--", "touch", "ran"}, exitNotObtained, "held by another owner"},
		{"lock held past -wait", []string{"-wait", "100ms", "held", "--", "touch", "ran"}, exitNotObtained, "after waiting 100ms"},
		{"fenced lock held", []string{"-fenced", "held", "--", "touch", "ran"}, exitNotObtained, "held by another owner"},
		{"redis unreachable", []string{"-redis", "redis://user:s3cret@" + closed, "e", "--", "true"}, exitUnavailable, "cannot reach Redis at " + closed},
		{"status, redis unreachable", []string{"-redis", "redis://:s3cret@" + closed, "-status", "e"}, exitUnavailable, closed},
		{"no arguments", nil, exitUsage, "missing NAME"},
		{"no NAME", []string{"--", "true"}, exitUsage, "missing NAME before --"},
		{"no --", []string{"f", "true"}, exitUsage, "missing --"},
		{"no command", []string{"f", "--"}, exitUsage, "missing COMMAND"},
		{"flag after NAME", []string{"f", "-ttl", "1s", "--", "true"}, exitUsage, "flags go before NAME"},
		{"unknown flag", []string{"-frob", "f", "--", "true"}, exitUsage, "frob"},
		{"ttl under 1ms", []string{"-ttl", "500us", "f", "--", "true"}, exitUsage, "-ttl"},
		{"ttl zero", []string{"-ttl", "0", "f", "--", "true"}, exitUsage, "-ttl"},
		{"negative wait", []string{"-wait", "-1s", "f", "--", "true"}, exitUsage, "-wait"},
		{"negative grace", []string{"-grace", "-1s", "f", "--", "true"}, exitUsage, "-grace"},
		{"bad duration", []string{"-ttl", "soon", "f", "--", "true"}, exitUsage, "-ttl"},
		{"once under 1ms", []string{"-once", "0s", "f", "--", "true"}, exitUsage, "-once"},
		{"once with fenced", []string{"-once", "1h", "-fenced", "f", "--", "true"}, exitUsage, "-fenced"},
		{"once with wait", []string{"-once", "1h", "-wait", "1s", "f", "--", "true"}, exitUsage, "-wait"},
		{"once with ttl", []string{"-once", "1h", "-ttl", "1s", "f", "--", "true"}, exitUsage, "-ttl"},
		{"audit without fenced", []string{"-audit=false", "f", "--", "true"}, exitUsage, "-audit"},
		{"invalid name", []string{"}f", "--", "true"}, exitUsage, "invalid lock name"},
		{"status with a command", []string{"-status", "f", "--", "true"}, exitUsage, "-status"},
		{"bad redis URL", []string{"-redis", "redis://user:s3cret@ho st:1/", "f", "--", "true"}, exitUsage, "-redis"},
		{"bad redis scheme", []string{"-redis", "http://user:s3cret@host/", "f", "--", "true"}, exitUsage, "-redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := h.with(t).run(tc.args...)
			wantCode(t, r, tc.want)
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr: got %q, want it to contain %q", r.stderr, tc.stderr)
			}
			if strings.Contains(r.stderr, "s3cret") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
	t.Cleanup(func() { h.wantNoFile("ran") })
}

// closedPort returns a loopback address nothing listens on: on 127.0.0.2,
// where no test's server binds (they bind 127.0.0.1), so that a port freed
// here is not taken by a server another package starts meanwhile.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestCommandEnvironment(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const script = `printf '%s %s %s\n' "$LEASEKIT_NAME" "$LEASEKIT_TOKEN" "$LEASEKIT_KEY"`
	// An inherited token (a nested lockrun, say) never reaches the command.
	inherited := []string{"LEASEKIT_TOKEN=999", "LEASEKIT_NAME=outer", "LEASEKIT_KEY=outer"}
	for i := range 2 {
		r := h.start(inherited, "-fenced", "env", "--", "sh", "-c", script).wait(t)
		wantCode(t, r, 0)
		fence, err := h.client.Get(t.Context(), scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, "env"))).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := "env " + fence + " env\n"; r.stdout != want {
			t.Fatalf("fenced run %d: the command saw %q, want %q", i, r.stdout, want)
		}
		// The audit's findings (this server has no AOF) go to stderr.
		if !strings.Contains(r.stderr, "audit") {
			t.Errorf("fenced run %d: stderr has no audit warning: %q", i, r.stderr)
		}
	}
	r := h.start(inherited, "env", "--", "sh", "-c", script).wait(t)
	wantCode(t, r, 0)
	if want := "env  env\n"; r.stdout != want {
		t.Fatalf("efficiency run: the command saw %q, want %q", r.stdout, want)
	}
}

func TestStatusNeverShowsTheOwner(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.start(nil, "-fenced", "report", "--", "sh", "-c", blockingScript)
	h.waitFile("started")
	value, err := h.client.Get(t.Context(), scripts.LockKey(lease.DefaultPrefix, "report")).Result()
	if err != nil {
		t.Fatal(err)
	}
	pv, err := scripts.ParseValue(value, true)
	if err != nil {
		t.Fatalf("the lock's value: %v", err)
	}
	owner, token := pv.Owner, strconv.FormatUint(pv.Token, 10)
	for _, flags := range [][]string{{"-status", "report"}, {"-fenced", "-status", "report"}} {
		r := h.run(flags...)
		wantCode(t, r, 0)
		for _, want := range []string{"held: yes", "kind: fenced lock", "last token: " + token, "key: leasekit:{report}"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: got %q, want it to contain %q", flags, r.stdout, want)
			}
		}
		if strings.Contains(r.stdout, owner[:8]) || strings.Contains(r.stderr, owner[:8]) {
			t.Errorf("%v: the output shows the owner id %q:\n%s%s", flags, owner, r.stdout, r.stderr)
		}
	}
	h.touch("release")
	wantCode(t, p.wait(t), 0)
	r := h.run("-status", "report")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "held: no") || !strings.Contains(r.stdout, "last token: "+token) {
		t.Errorf("after release: got %q, want held: no and the last token", r.stdout)
	}
	r = h.run("-status", "never-taken")
	if !strings.Contains(r.stdout, "held: no") || !strings.Contains(r.stdout, "last token: none") || !strings.Contains(r.stdout, "kind: lock\n") {
		t.Errorf("a lock never taken: got %q, want held: no and no token", r.stdout)
	}
}

func TestWaitTakesTheLockWhenReleased(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	holder := h.start(nil, "queue", "--", "sh", "-c", blockingScript)
	h.waitFile("started")
	waiter := h.start(nil, "-wait", "30s", "queue", "--", "sh", "-c", "echo ran >> runs")
	// The waiter subscribes to the grants handed to it, then queues.
	queue := scripts.QueueKey(scripts.LockKey(lease.DefaultPrefix, "queue"))
	for deadline := time.Now().Add(hang); ; time.Sleep(10 * time.Millisecond) {
		n, err := h.client.ZCard(t.Context(), queue).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not queue in %s within %v", queue, hang)
		}
	}
	h.touch("release")
	wantCode(t, holder.wait(t), 0)
	wantCode(t, waiter.wait(t), 0)
	h.wantRuns(2)
}

func TestSignalsAreForwarded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i, sig := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"INT", syscall.SIGINT}, {"TERM", syscall.SIGTERM}, {"HUP", syscall.SIGHUP},
		{"QUIT", syscall.SIGQUIT}, {"USR1", syscall.SIGUSR1}, {"USR2", syscall.SIGUSR2},
	} {
		t.Run(sig.name, func(t *testing.T) {
			t.Parallel()
			h := h.with(t)
			code := 10 + i
			started := "started-" + sig.name
			script := fmt.Sprintf(`trap 'echo got-%s; exit %d' %s; touch %s; while :; do sleep 0.02; done`,
				sig.name, code, sig.name, started)
			p := h.start(nil, "sig-"+sig.name, "--", "sh", "-c", script)
			h.waitFile(started)
			if err := p.cmd.Process.Signal(sig.sig); err != nil {
				t.Fatal(err)
			}
			r := p.wait(t)
			wantCode(t, r, code)
			if want := "got-" + sig.name + "\n"; r.stdout != want {
				t.Errorf("stdout: got %q, want %q", r.stdout, want)
			}
		})
	}
}
