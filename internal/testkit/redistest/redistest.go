// Package redistest gives leasekit's tests a Redis: an in-process miniredis,
// and a real redis-server that it starts on a free loopback port in a temp dir.
//
// The same test body runs on both through Run. Without a redis-server binary
// the real-server subtests skip with a message; with LEASEKIT_REQUIRE_REDIS=1
// (set by .ci/test.sh and CI) they fail instead. LEASEKIT_NO_REDIS=1
// makes the harness act as if there were no binary, so that a machine that
// has one (CI) can prove that the suite passes on a machine with only Go.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/leasekit/leasekit/internal/testkit/leakcheck"
	"github.com/redis/go-redis/v9"
)

// RequireEnv is the environment variable that turns a missing redis-server
// from a skip into a failure.
const RequireEnv = "LEASEKIT_REQUIRE_REDIS"

// NoServerEnv is the environment variable that hides redis-server from the
// harness: every real-server test skips, as on a machine with only Go.
const NoServerEnv = "LEASEKIT_NO_REDIS"

// Backend is one Redis a test runs against.
type Backend struct {
	// Name is "miniredis" or "redis-server".
	Name string
	// Client is connected to the backend and closed when the test ends.
	Client *redis.Client
	// Mini is the miniredis server, nil on a real redis-server.
	Mini *miniredis.Miniredis
	// Server is the real server, nil on miniredis.
	Server *Server

	mu  sync.Mutex
	now time.Time // miniredis's clock, which only Advance moves
}

// Real reports whether the backend is a real redis-server.
func (b *Backend) Real() bool { return b.Server != nil }

// Pass lets d go by for key expiry: Advance on miniredis, a sleep on a real
// server (keep d short there).
func (b *Backend) Pass(d time.Duration) {
	if b.Mini != nil {
		b.Advance(d)
		return
	}
	time.Sleep(d)
}

// Advance moves miniredis's time forward by d: key ttls run down and the
// server clock (TIME, which the clock floor reads) moves with them, as
// leasetest.Env.Advance does. It does nothing on a real server.
func (b *Backend) Advance(d time.Duration) {
	if b.Mini == nil || d <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = b.now.Add(d)
	b.Mini.FastForward(d)
	b.Mini.SetTime(b.now)
}

// Run runs body once on miniredis and once on a real redis-server, as subtests
// named after the backend.
func Run(t *testing.T, body func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { body(t, Mini(t)) })
	t.Run("redis-server", func(t *testing.T) { body(t, Real(t)) })
}

// Mini returns a backend on a fresh miniredis, closed when the test ends.
// Its clock stands still until Advance moves it, so that key expiry and the
// server time the clock floor reads stay in step.
func Mini(t testing.TB) *Backend {
	t.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatalf("redistest: starting miniredis: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() {
		_ = c.Close()
		m.Close()
	})
	b := &Backend{Name: "miniredis", Client: c, Mini: m, now: time.Now().UTC()}
	m.SetTime(b.now)
	return b
}

var shared struct {
	sync.Mutex
	server *Server
	err    error
}

// Real returns a backend on the package's shared redis-server, emptied for this
// test (FLUSHALL SYNC, SCRIPT FLUSH: SYNC, as a server that frees a flush
// lazily, such as Valkey, would still be freeing the last test's memory). The
// server starts on first use and stops in Main. Tests that restart or
// reconfigure a server use Start instead.
func Real(t testing.TB) *Backend {
	t.Helper()
	RequireBinary(t)
	shared.Lock()
	if shared.server == nil && shared.err == nil {
		shared.server, shared.err = start()
	}
	s, err := shared.server, shared.err
	shared.Unlock()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	c := s.Client(t)
	if err := c.Do(context.Background(), "FLUSHALL", "SYNC").Err(); err != nil {
		t.Fatalf("redistest: FLUSHALL SYNC: %v", err)
	}
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatalf("redistest: SCRIPT FLUSH: %v", err)
	}
	return &Backend{Name: "redis-server", Client: c, Server: s}
}

// Main runs a package's tests, stops its shared redis-server, and then fails
// the run if any goroutine is left behind (leakcheck): every Locker, client and
// server a test opened must be closed by then. Call it from TestMain:
// os.Exit(redistest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	shared.Lock()
	if shared.server != nil {
		shared.server.Stop()
	}
	shared.Unlock()
	if code == 0 {
		if err := leakcheck.Find(leakcheck.Within); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: %v\n", err)
			code = 1
		}
	}
	return code
}

// RequireBinary skips the test when redis-server is not installed, or fails it
// when LEASEKIT_REQUIRE_REDIS=1.
func RequireBinary(t testing.TB) {
	t.Helper()
	if !Available() {
		if os.Getenv(NoServerEnv) == "1" {
			t.Skipf("redis-server hidden by %s=1", NoServerEnv)
		}
		const msg = "redis-server not found in PATH: install it (Debian: apt-get install redis-server) or run .ci/test.sh"
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s; %s=1 requires it", msg, RequireEnv)
		}
		t.Skip(msg)
	}
}

// Available reports whether the real-server tests can run: redis-server is
// on PATH, and not hidden by LEASEKIT_NO_REDIS=1.
func Available() bool {
	if os.Getenv(NoServerEnv) == "1" {
		return false
	}
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Server is a redis-server process on a loopback port.
type Server struct {
	Addr string
	Dir  string
	args []string
	env  []string // added to the process's environment
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a dedicated redis-server for one test, with extra config
// arguments (such as "--appendonly", "yes"), and stops it when the test ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	RequireBinary(t)
	s, err := start(args...)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

func start(args ...string) (*Server, error) { return startWith(nil, args...) }

// startWith is start, with env added to the server's environment.
func startWith(env []string, args ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "leasekit-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, args: args, env: env}
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("starting redis-server: %w", lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts the process on s.Addr and waits until it answers PING.
func (s *Server) launch() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	argv := append([]string{
		"--port", port, "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.Dir, "redis-"+port+".log"),
	}, s.args...)
	cmd := exec.Command("redis-server", argv...)
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.SysProcAttr = dieWithTest()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis-"+port+".log"))
			return fmt.Errorf("redis-server on %s exited: %s", s.Addr, lastLines(log))
		default:
		}
		// NOAUTH is an answer too: a server started with --requirepass.
		if err := c.Ping(context.Background()).Err(); err == nil || strings.HasPrefix(err.Error(), "NOAUTH") {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Kill()
	return errors.New("redis-server on " + s.Addr + " did not answer PING within 10s")
}

func lastLines(b []byte) string {
	const most = 400
	if len(b) > most {
		b = b[len(b)-most:]
	}
	return string(b)
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Restart kills the server and starts it again on the same port and dir, with
// the same arguments: whatever it had not persisted is gone.
func (s *Server) Restart() error { return s.RestartAfter(0) }

// RestartAfter kills the server, leaves it down for down, and starts it again
// as Restart does.
func (s *Server) RestartAfter(down time.Duration) error {
	s.Kill()
	time.Sleep(down)
	var err error
	for range 50 { // the port can take a moment to be free again
		if err = s.launch(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	s.Kill()
	_ = os.RemoveAll(s.Dir)
}

// WakeOnly hides a *redis.Client from leasekit, as a client wrapped by an
// application would: the Lockers on it do not queue their waiters, and their
// releases publish wake-ups, as on a ClusterClient or under WithReplicas.
type WakeOnly struct{ *redis.Client }
