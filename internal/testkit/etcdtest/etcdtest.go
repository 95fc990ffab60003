// Package etcdtest gives leasekit's tests a real etcd: clusters of etcd
// processes that it starts on free loopback ports in a temp dir, and the
// shared cluster that the test command (.ci/etcd.sh) started.
//
// It speaks to etcd through etcd's JSON gateway over HTTP (/health,
// /v3/maintenance/status), so that it needs no etcd client module: only the
// standard library. The tests hand Endpoints to whatever client they test.
//
// Without an etcd binary the tests that need one skip with a message; with
// LEASEKIT_REQUIRE_REDIS=1 (set by .ci/test.sh and CI, and read by redistest
// too) they fail instead. LEASEKIT_NO_REDIS=1 makes the harness act as if
// there were no binary and no shared cluster, so that a machine that has them
// (CI) can prove that the suite passes on a machine with only Go.
package etcdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing etcd binary
// from a skip into a failure. It is redistest's: one switch for every real
// server the suite starts.
const RequireEnv = "LEASEKIT_REQUIRE_REDIS"

// NoServerEnv is the environment variable that hides etcd from the harness,
// the binary and the shared cluster alike: every test that needs etcd skips,
// as on a machine with only Go. It is redistest's too.
const NoServerEnv = "LEASEKIT_NO_REDIS"

// EndpointsEnv is the environment variable that names the shared cluster's
// client endpoints, comma-separated host:port pairs (.ci/etcd.sh exports it).
const EndpointsEnv = "LEASEKIT_ETCD_ENDPOINTS"

// Test timings. The heartbeat and election timeout are a tenth and a half of
// etcd's defaults, so that a killed leader is replaced in about a second on a
// loaded machine; fsync stays on, as in production.
const (
	heartbeatMS     = 50
	electionMS      = 500
	startWait       = 30 * time.Second // every member healthy, at Start and Restart
	leaderWait      = 10 * time.Second // a leader elected, in Leader
	killWait        = 10 * time.Second // a SIGKILLed member reaped
	requestTimeout  = 2 * time.Second  // one HTTP request to a member
	pollPause       = 20 * time.Millisecond
	startTries      = 5  // clusters started on fresh ports before Start gives up
	restartRelaunch = 50 // launches of one member, its port busy, in Restart
)

// client talks to the members. Without keep-alives it holds no connection,
// and so no goroutine, between requests: a test binary that checks for
// leaked goroutines (leakcheck) sees none of the harness's.
var client = &http.Client{
	Timeout:   requestTimeout,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// clusters numbers the clusters of this process, for unique cluster tokens.
var clusters atomic.Int64

// Cluster is a cluster of etcd processes on loopback ports. Its methods are
// for the test's goroutine.
type Cluster struct {
	// Members are the cluster's members, in start order: Members[i] is
	// member i of Leader, Kill and Restart.
	Members []*Member

	dir string // holds every member's data dir and log
}

// Member is one etcd process of a Cluster.
type Member struct {
	// Name is the member's --name: "m0", "m1", ...
	Name string
	// Endpoint is the member's client address, "127.0.0.1:PORT".
	Endpoint string
	// PeerURL is the member's peer URL, "http://127.0.0.1:PORT".
	PeerURL string
	// DataDir is the member's --data-dir, kept across Kill and Restart.
	DataDir string
	// LogFile is the member's log: etcd's own (zap, JSON lines) and whatever
	// the process wrote to stdout and stderr.
	LogFile string
	// ID is the member's Raft ID, as its status header reports it.
	ID uint64

	args []string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// Available reports whether Start can run: etcd is on PATH, and not hidden
// by LEASEKIT_NO_REDIS=1.
func Available() bool {
	if os.Getenv(NoServerEnv) == "1" {
		return false
	}
	_, err := exec.LookPath("etcd")
	return err == nil
}

// RequireBinary skips the test when etcd is not installed, or is hidden by
// LEASEKIT_NO_REDIS=1, and fails it instead when LEASEKIT_REQUIRE_REDIS=1
// (unless hidden).
func RequireBinary(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	if os.Getenv(NoServerEnv) == "1" {
		t.Skipf("etcd hidden by %s=1", NoServerEnv)
	}
	const msg = "etcd not found in PATH: install it (Debian: apt-get install etcd-server) or run .ci/test.sh"
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s; %s=1 requires it", msg, RequireEnv)
	}
	t.Skip(msg)
}

// Shared returns the client endpoints (host:port) of the cluster that the
// test command started, from LEASEKIT_ETCD_ENDPOINTS, once one of them
// answers /health. When that is unset it starts a 3-member cluster for this
// test alone (Start), so that `go test` works on a machine with etcd and no
// test command. It skips under LEASEKIT_NO_REDIS=1. Tests that kill or
// restart members use Start: the shared cluster is everyone's.
func Shared(t testing.TB) []string {
	t.Helper()
	if os.Getenv(NoServerEnv) == "1" {
		t.Skipf("etcd hidden by %s=1", NoServerEnv)
	}
	v := os.Getenv(EndpointsEnv)
	if strings.TrimSpace(v) == "" {
		return Start(t, 3).Endpoints()
	}
	var eps []string
	for ep := range strings.SplitSeq(v, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	var errs []error
	for _, ep := range eps {
		if err := health(t.Context(), ep); err != nil {
			errs = append(errs, err)
			continue
		}
		return eps
	}
	t.Fatalf("etcdtest: no endpoint of %s=%q is healthy: %v", EndpointsEnv, v, errors.Join(errs...))
	return nil
}

// Start starts a cluster of n etcd members (3 for most tests) on free
// loopback ports, each with its data dir and log in a temp dir, and returns
// once every member answers /health and a leader is elected. It stops the
// cluster when the test ends, after logging the end of each member's log if
// the test failed. A port taken meanwhile by another process makes it start
// the whole cluster again on fresh ports, up to 5 times. It skips or fails
// as RequireBinary does when etcd is missing.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	RequireBinary(t)
	if n < 1 {
		t.Fatalf("etcdtest: Start(%d): a cluster needs a member", n)
	}
	dir, err := os.MkdirTemp("", "leasekit-etcd-")
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	c := &Cluster{dir: dir}
	t.Cleanup(c.Stop)
	t.Cleanup(func() { // runs before Stop, while the logs are there
		if t.Failed() {
			for _, m := range c.Members {
				t.Logf("etcdtest: the end of %s's log (%s):\n%s", m.Name, m.LogFile, tail(m.LogFile))
			}
		}
	})
	var lastErr error
	for try := range startTries {
		if try > 0 {
			c.kill()
			if err := os.RemoveAll(c.dir); err != nil {
				t.Fatalf("etcdtest: %v", err)
			}
			if err := os.Mkdir(c.dir, 0o755); err != nil {
				t.Fatalf("etcdtest: %v", err)
			}
		}
		exited, err := c.launch(t.Context(), n)
		if err == nil {
			break
		}
		lastErr = err
		if !exited { // not a port taken: a fresh start would fail the same way
			t.Fatalf("etcdtest: starting %d members: %v", n, err)
		}
		if try == startTries-1 {
			t.Fatalf("etcdtest: starting %d members, %d tries: %v", n, startTries, lastErr)
		}
	}
	for _, m := range c.Members {
		st, err := m.status(t.Context())
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		m.ID = st.Header.MemberID
	}
	c.Leader(t)
	return c
}

// launch picks ports, starts n members with a new cluster token and waits
// for them to be healthy. exited reports that a member's process ended
// before that, as it does when its port was taken.
func (c *Cluster) launch(ctx context.Context, n int) (exited bool, err error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return false, err
	}
	c.Members = make([]*Member, n)
	peers := make([]string, n)
	for i := range c.Members {
		name := "m" + strconv.Itoa(i)
		m := &Member{
			Name:     name,
			Endpoint: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			PeerURL:  "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1])),
			DataDir:  filepath.Join(c.dir, name),
			LogFile:  filepath.Join(c.dir, "etcd-"+strconv.Itoa(i)+".log"),
		}
		c.Members[i] = m
		peers[i] = name + "=" + m.PeerURL
	}
	token := fmt.Sprintf("leasekit-%d-%d-%d", os.Getpid(), clusters.Add(1), time.Now().UnixNano())
	for _, m := range c.Members {
		clientURL := "http://" + m.Endpoint
		m.args = []string{
			"--name", m.Name,
			"--data-dir", m.DataDir,
			"--listen-client-urls", clientURL,
			"--advertise-client-urls", clientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(peers, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", strconv.Itoa(heartbeatMS),
			"--election-timeout", strconv.Itoa(electionMS),
			// A restarted member asks before it calls an election, so that
			// rejoining does not depose a healthy leader (etcd 3.5's default).
			"--pre-vote=true",
			"--logger", "zap",
			"--log-outputs", m.LogFile,
		}
		if err := m.exec(); err != nil {
			return false, err
		}
	}
	return awaitHealthy(ctx, c.Members)
}

// exec starts the member's process, with its stdout and stderr appended to
// its log, and a goroutine that reaps it.
func (m *Member) exec() error {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return err
	}
	log, err := os.OpenFile(m.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own copy
	cmd := exec.Command(bin, m.args...)
	cmd.Env = environ()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = dieWithTest()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	m.cmd, m.done = cmd, done
	return nil
}

// environ is the test's environment without the ETCD_ variables, which etcd
// reads as flags: a developer's ETCD_DATA_DIR or ETCD_CLIENT_CERT_AUTH must
// not reach the harness's members.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// awaitHealthy waits up to startWait until every member answers /health
// with true, which etcd does once it knows a leader and a read through Raft
// succeeds. exited reports that a member's process ended first.
func awaitHealthy(ctx context.Context, members []*Member) (exited bool, err error) {
	deadline := time.Now().Add(startWait)
	healthy := make([]bool, len(members))
	for {
		left := 0
		var errs []error
		for i, m := range members {
			select {
			case <-m.done:
				return true, fmt.Errorf("%s (client %s, peer %s) exited: %s", m.Name, m.Endpoint, m.PeerURL, tail(m.LogFile))
			default:
			}
			if healthy[i] {
				continue
			}
			if err := health(ctx, m.Endpoint); err != nil {
				left++
				errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
				continue
			}
			healthy[i] = true
		}
		if left == 0 {
			return false, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("not healthy within %v: %w", startWait, errors.Join(errs...))
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(pollPause):
		}
	}
}

// Running reports whether the member's process is running: started, and
// neither killed nor exited.
func (m *Member) Running() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// kill ends the member's process with SIGKILL, if it runs, and waits for it.
func (m *Member) kill() error {
	if m.cmd == nil {
		return nil
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-m.done:
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d) still running %v after SIGKILL", m.Name, m.cmd.Process.Pid, killWait)
	}
	m.cmd = nil
	return nil
}

// Endpoints returns the members' client addresses, "127.0.0.1:PORT", in
// member order, killed members included: what an etcd client's Endpoints
// take.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Endpoint
	}
	return eps
}

// Leader returns the index in Members of the current leader, waiting up to
// 10s for one: a running member that reports itself the leader, and that a
// majority of all the members (itself included) report as theirs. It fails
// the test if there is none by then.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(leaderWait)
	for {
		i, err := c.leader(t.Context())
		if err == nil {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdtest: no leader within %v: %v", leaderWait, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("etcdtest: waiting for a leader: %v", t.Context().Err())
		case <-time.After(pollPause):
		}
	}
}

// leader asks every running member for its status, once.
func (c *Cluster) leader(ctx context.Context) (int, error) {
	votes := map[uint64]int{}
	self := make([]bool, len(c.Members))
	var errs []error
	for i, m := range c.Members {
		if !m.Running() {
			continue
		}
		st, err := m.status(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Leader != 0 {
			votes[st.Leader]++
		}
		self[i] = st.Leader != 0 && st.Leader == m.ID
	}
	for i, m := range c.Members {
		if self[i] && votes[m.ID] > len(c.Members)/2 {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no member is leader of a majority (votes by leader ID: %v; errors: %v)", votes, errors.Join(errs...))
}

// Kill ends member i with SIGKILL, as a crash would, and waits for its
// process to be gone. Its data dir stays, for Restart. It fails the test if
// the member is not running.
func (c *Cluster) Kill(t testing.TB, i int) {
	t.Helper()
	m := c.member(t, i)
	if !m.Running() {
		t.Fatalf("etcdtest: Kill(%d): %s is not running", i, m.Name)
	}
	if err := m.kill(); err != nil {
		t.Fatalf("etcdtest: Kill(%d): %v", i, err)
	}
}

// Restart starts member i again, after Kill, with the same data dir, ports
// and flags, and waits until it answers /health: it has rejoined the cluster
// and knows its leader. A port another process took meanwhile makes it
// launch the member again, up to 50 times. It fails the test if the member
// is running.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	m := c.member(t, i)
	if m.Running() {
		t.Fatalf("etcdtest: Restart(%d): %s is running; Kill it first", i, m.Name)
	}
	var err error
	for range restartRelaunch {
		if err = m.exec(); err != nil {
			t.Fatalf("etcdtest: Restart(%d): %v", i, err)
		}
		var exited bool
		if exited, err = awaitHealthy(t.Context(), []*Member{m}); err == nil {
			return
		}
		if !exited {
			break
		}
		m.cmd = nil
		time.Sleep(pollPause)
	}
	t.Fatalf("etcdtest: Restart(%d): %v", i, err)
}

// member returns Members[i], or fails the test.
func (c *Cluster) member(t testing.TB, i int) *Member {
	t.Helper()
	if i < 0 || i >= len(c.Members) {
		t.Fatalf("etcdtest: no member %d in a cluster of %d", i, len(c.Members))
	}
	return c.Members[i]
}

// Stop kills every member and removes their data dirs and logs. Start
// registers it with t.Cleanup; calling it again does nothing.
func (c *Cluster) Stop() {
	c.kill()
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
		c.dir = ""
	}
}

// kill kills every member.
func (c *Cluster) kill() {
	for _, m := range c.Members {
		_ = m.kill()
	}
}

// status is the part of /v3/maintenance/status's answer that the harness
// reads. The gateway writes uint64s as strings, and leaves zeros out.
type status struct {
	Header struct {
		MemberID uint64 `json:"member_id,string"`
	} `json:"header"`
	Leader uint64 `json:"leader,string"`
}

// status asks the member for its status.
func (m *Member) status(ctx context.Context) (status, error) {
	var st status
	err := post(ctx, m.Endpoint, "/v3/maintenance/status", struct{}{}, &st)
	if err == nil && st.Header.MemberID == 0 {
		err = fmt.Errorf("%s: status without a member_id", m.Endpoint)
	}
	return st, err
}

// health reports whether the etcd at endpoint (host:port, or a URL) answers
// GET /health with {"health":"true"}.
func health(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(endpoint)+"/health", nil)
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
	}
	if err := do(req, &h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("%s: /health is %q", endpoint, h.Health)
	}
	return nil
}

// post sends in as JSON to path on the etcd at endpoint and decodes the
// answer into out.
func post(ctx context.Context, endpoint, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL(endpoint)+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return do(req, out)
}

// do sends req and decodes a 200 answer's JSON body into out.
func do(req *http.Request, out any) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w: %s", req.Method, req.URL, err, b)
	}
	return nil
}

// baseURL prefixes a host:port endpoint with http://.
func baseURL(endpoint string) string {
	if strings.Contains(endpoint, "://") {
		return endpoint
	}
	return "http://" + endpoint
}

// freePorts returns n distinct TCP ports that nothing listened on, on
// 127.0.0.1: all held at once while picked, so that none comes twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last lines of a log file, or why it cannot.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const most = 2000
	if len(b) > most {
		b = b[len(b)-most:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(bytes.TrimSpace(b))
}
