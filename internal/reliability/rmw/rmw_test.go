package rmw_test

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/reliability/pgtest"
	testproc "github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

const (
	workers = 3
	ttl     = 300 * time.Millisecond
	// everyNth read is held: its worker is stopped until another worker has
	// taken the lock and read, and then writes first (the A-first story).
	everyNth = 6
)

// rounds is each worker's number of rounds: LEASEKIT_RMW_ROUNDS, default 16.
func rounds(t *testing.T) int {
	s := os.Getenv("LEASEKIT_RMW_ROUNDS")
	if s == "" {
		return 16
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("LEASEKIT_RMW_ROUNDS=%q: want a positive number", s)
	}
	return n
}

// TestReadModifyWrite runs workers that increment one counter through each
// fence, claiming at first touch, while holders are stopped past their ttl:
// every acknowledged increment must be in the final value. The same run with
// plain reads must lose increments: the held reads force the A-first story
// (A reads, B reads, A writes, B writes) a few times in each run.
func TestReadModifyWrite(t *testing.T) {
	b := redistest.Real(t)
	for _, fence := range []string{"register", "sqlite", "postgres", "proxy"} {
		for _, claim := range []bool{true, false} {
			name := fence + "/claim"
			if !claim {
				name = fence + "/plain-read"
			}
			t.Run(name, func(t *testing.T) {
				cfg := workerConfig{Fence: fence, Claim: claim, Redis: b.Server.Addr, Lock: "rmw-" + strings.ReplaceAll(name, "/", "-"),
					Rounds: rounds(t), TTL: ttl}
				final := setUp(t, b, &cfg)
				r := run(t, cfg)
				lost := r.acked - final()
				t.Logf("%s: acked %d, final %d, lost %d; refused: %d writes, %d claims; held reads %d, other pauses %d",
					name, r.acked, r.acked-lost, lost, r.staleWrites, r.staleClaims, r.held, r.pauses)
				if r.held == 0 {
					t.Fatalf("no read was held: the run proves nothing (more rounds?)")
				}
				if claim {
					if lost != 0 {
						t.Errorf("with claims: %d acknowledged increments lost, want 0", lost)
					}
					if r.heldRefused != r.held {
						t.Errorf("with claims: %d of %d held holders' writes refused, want all", r.heldRefused, r.held)
					}
				} else if lost <= 0 {
					t.Errorf("with plain reads: %d increments lost, want some: the check cannot fail", lost)
				}
			})
		}
	}
}

// setUp makes the counter for cfg.Fence, fills in how the workers reach it,
// and returns how to read its final value.
func setUp(t *testing.T, b *redistest.Backend, cfg *workerConfig) (final func() int64) {
	t.Helper()
	switch cfg.Fence {
	case "register":
		reg := correctness.NewRegister(b.Client)
		return func() int64 {
			v, _, err := reg.Read(t.Context(), cfg.Lock)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.ParseInt(string(v), 10, 64)
			return n
		}
	case "sqlite":
		cfg.DSN = "file:" + filepath.Join(t.TempDir(), "counter.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
		db, err := sql.Open("sqlite", cfg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return sqlCounterFinal(t, db)
	case "postgres":
		var db *sql.DB
		db, cfg.DSN = pgtest.Open(t)
		return sqlCounterFinal(t, db)
	}
	backend := &counterBackend{}
	direct := httptest.NewServer(backend)
	t.Cleanup(direct.Close)
	proxied := httptest.NewServer(correctness.NewFencingProxy(backend))
	t.Cleanup(proxied.Close)
	cfg.Direct, cfg.Proxy = direct.URL+"/counter", proxied.URL+"/counter"
	return backend.get
}

func sqlCounterFinal(t *testing.T, db *sql.DB) func() int64 {
	t.Helper()
	for _, stmt := range []string{sqlSchema, sqlCreate} {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return func() (v int64) {
		if err := db.QueryRowContext(t.Context(), sqlRead).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// counterBackend is the service behind the FencingProxy: it knows nothing
// of tokens; GET returns the counter, PUT sets it.
type counterBackend struct {
	mu sync.Mutex
	n  int64
}

func (c *counterBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method == http.MethodPut {
		body, _ := io.ReadAll(r.Body)
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.n = n
	}
	fmt.Fprint(w, c.n)
}

func (c *counterBackend) get() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// result is what a run's workers reported.
type result struct {
	acked                    int64
	staleWrites, staleClaims int
	held, heldRefused        int // reads held until another worker read, and their writes refused
	pauses                   int // other stops past the ttl, at random times
}

// proc is one worker process.
type proc struct {
	cmd     *exec.Cmd
	stdin   io.Writer
	stopped bool // by a random pause
	done    bool
}

type line struct {
	p    *proc
	text string
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to worker %d: %v", sig, p.cmd.Process.Pid, err)
	}
}

func (p *proc) goAhead(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		t.Fatalf("worker %d: %v", p.cmd.Process.Pid, err)
	}
}

// run starts the workers and drives them to the end: it answers each read
// with a go-ahead, holds every everyNth read, and stops a random worker past
// the ttl now and then.
func run(t *testing.T, cfg workerConfig) result {
	t.Helper()
	lines, procs := start(t, cfg)
	var (
		r         result
		held      *proc // stopped after its read, until another worker reads
		heldToken uint64
		next      *proc // that worker, whose go-ahead waits for held's write
		reads     int
		active    = len(procs)
		cont      = make(chan *proc)
		stopped   int // random pauses not yet ended
	)
	pause := time.NewTimer(ttl)
	defer pause.Stop()
	deadline := time.After(3 * time.Minute)
	release := func() { // held's write is in: let the next worker write
		held = nil
		if next != nil {
			next.goAhead(t)
			next = nil
		}
	}
	for active > 0 {
		select {
		case l := <-lines:
			kind, _, _ := strings.Cut(l.text, " ")
			switch kind {
			case "R":
				reads++
				token, _ := strconv.ParseUint(strings.Fields(l.text)[1], 10, 64)
				switch {
				case held != nil && next == nil && token > heldToken:
					// l.p took the lock after held's lease ran out.
					next = l.p
					r.held++
					held.signal(t, syscall.SIGCONT)
				case held == nil && reads%everyNth == 0 && !l.p.stopped && active > 1:
					held, heldToken = l.p, token
					held.signal(t, syscall.SIGSTOP)
					if err := testproc.AwaitStopped(held.cmd.Process.Pid, 10*time.Second); err != nil {
						t.Fatal(err)
					}
					held.goAhead(t) // read when it runs again
				default:
					l.p.goAhead(t)
				}
			case "A", "S":
				if kind == "A" {
					r.acked++
				} else {
					r.staleWrites++
				}
				if l.p == held {
					if kind == "S" && next != nil {
						r.heldRefused++
					}
					release()
				}
			case "C":
				r.staleClaims++
			case "D":
				l.p.done = true
				active--
				if held != nil && next == nil && active == 1 {
					held.signal(t, syscall.SIGCONT) // nobody is left to read before it
				}
			default:
				t.Fatalf("worker %d: %s", l.p.cmd.Process.Pid, l.text)
			}
		case <-pause.C:
			if p := pick(procs, held); p != nil {
				p.stopped = true
				r.pauses++
				stopped++
				p.signal(t, syscall.SIGSTOP)
				time.AfterFunc(ttl+rand.N(ttl), func() { cont <- p })
			}
			pause.Reset(ttl + rand.N(2*ttl))
		case p := <-cont:
			p.stopped = false
			stopped--
			p.signal(t, syscall.SIGCONT)
		case <-deadline:
			t.Fatalf("the workers did not finish in 3 minutes: %d reads, %+v", reads, r)
		}
	}
	for ; stopped > 0; stopped-- { // a worker may be stopped after its last line
		(<-cont).signal(t, syscall.SIGCONT)
	}
	for _, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v", p.cmd.Process.Pid, err)
		}
	}
	return r
}

// pick returns a random worker that runs and is not held, or nil.
func pick(procs []*proc, held *proc) *proc {
	var can []*proc
	for _, p := range procs {
		if !p.stopped && !p.done && p != held {
			can = append(can, p)
		}
	}
	if len(can) == 0 {
		return nil
	}
	return can[rand.N(len(can))]
}

// start starts the worker processes, and returns their report lines.
func start(t *testing.T, cfg workerConfig) (<-chan line, []*proc) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env, _ := json.Marshal(cfg)
	lines := make(chan line)
	var procs []*proc
	for range workers {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), workerEnv+"="+string(env))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, stdin: stdin}
		procs = append(procs, p)
		t.Cleanup(func() { // a failed run leaves workers behind
			if !p.done {
				_ = cmd.Process.Signal(syscall.SIGCONT)
				_ = cmd.Process.Kill()
			}
		})
		go func() {
			s := bufio.NewScanner(stdout)
			for s.Scan() {
				select {
				case lines <- line{p, s.Text()}:
				case <-t.Context().Done():
					return
				}
			}
		}()
	}
	return lines, procs
}
