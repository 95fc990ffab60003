package election_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/reliability/sqltest"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// candidateEnv carries a candidate child's candidateConfig, as JSON.
const candidateEnv = "LEASEKIT_CANDIDATE"

// candidateConfig is what a candidate child is told.
type candidateConfig struct {
	Addr  string        `json:"addr"`
	Name  string        `json:"name"`
	TTL   time.Duration `json:"ttl"`
	Value string        `json:"value"`
	DB    string        `json:"db,omitempty"`    // a SQLite file with the fenced table
	Proxy string        `json:"proxy,omitempty"` // a FencingProxy's URL
}

// candidateChild campaigns once in its own process. In office it says "lead
// <term>", then obeys its stdin: "write" writes with its term through a
// Register, ExecFenced and a FencingProxy and says how each fared ("register
// ok", "register stale <token> <highest>", "sql ok", "sql stale", "http
// <status>"), whatever its lease has
// become, as a leader that checked its leadership before a pause would;
// "resign" returns. It says "lost" when its term is lost, and "done <err>"
// when Campaign returns.
func candidateChild() int {
	var cfg candidateConfig
	if err := json.Unmarshal([]byte(os.Getenv(candidateEnv)), &cfg); err != nil {
		fmt.Println("error", err)
		return 2
	}
	client := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer client.Close()
	l := correctness.New(client, correctness.WithLogger(quiet), correctness.WithAudit(false))
	defer l.Close()
	commands := make(chan string)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			commands <- in.Text()
		}
		close(commands)
	}()
	ctx := context.Background()
	err := l.Campaign(ctx, cfg.Name, cfg.TTL, []byte(cfg.Value), func(fnCtx context.Context, term uint64) error {
		fmt.Println("lead", term)
		stop := context.AfterFunc(fnCtx, func() {
			if errors.Is(context.Cause(fnCtx), correctness.ErrLockLost) {
				fmt.Println("lost")
			}
		})
		defer stop()
		for c := range commands {
			switch c {
			case "write":
				fmt.Println("register", fenced(correctness.NewRegister(client).Write(ctx, cfg.Name, term, []byte(cfg.Value))))
				fmt.Println("sql", fenced(sqlWrite(ctx, cfg.DB, cfg.Name, cfg.Value, term)))
				fmt.Println("http", httpWrite(cfg.Proxy+"/"+cfg.Name, term))
			case "resign":
				return nil
			}
		}
		return nil
	})
	fmt.Println("done", err)
	return 0
}

// fenced says how a fenced write fared.
func fenced(err error) string {
	var stale *correctness.StaleTokenError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &stale):
		return fmt.Sprintf("stale %d %d", stale.Token, stale.Highest)
	case errors.Is(err, correctness.ErrStaleToken):
		return "stale"
	}
	return "error " + err.Error()
}

// sqlWrite writes value to the row id of the fenced table in the SQLite
// file at path, with token.
func sqlWrite(ctx context.Context, path, id, value string, token uint64) error {
	db, err := sqltest.OpenFile(path)
	if err != nil {
		return err
	}
	defer db.Close()
	return correctness.ExecFenced(ctx, db, sqltest.Update, value, correctness.TokenArg(token), id)
}

// httpWrite sends a write with token through a FencingProxy at url, and
// returns the status.
func httpWrite(url string, token uint64) string {
	req, err := http.NewRequest(http.MethodPut, url, nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set(correctness.TokenHeader, strconv.FormatUint(token, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// startCandidate starts a candidate child for the election name on b.
func startCandidate(t *testing.T, b *redistest.Backend, cfg candidateConfig) (*proc.Child, uint64) {
	t.Helper()
	cfg.Addr = b.Client.Options().Addr
	env, _ := json.Marshal(cfg)
	child := proc.Start(t, "candidate", candidateEnv+"="+string(env))
	var term uint64
	if line := child.Line(electionWait); !strings.HasPrefix(line, "lead ") {
		t.Fatalf("candidate child said %q, want lead <term>", line)
	} else if _, err := fmt.Sscanf(line, "lead %d", &term); err != nil {
		t.Fatal(err)
	}
	return child, term
}

// observed collects an observer's changes up to and including the leader
// with value want, and checks that they come in term order, never the same
// twice, with only none between leaders.
func observed(t *testing.T, seen <-chan correctness.Leader, after correctness.Leader, want string) correctness.Leader {
	t.Helper()
	last := after
	for {
		v := next(t, seen)
		switch {
		case v.Term == 0 && last.Term == 0:
			t.Fatalf("none twice in a row (after %s)", show(after))
		case v.Term != 0 && v.Term <= last.Term || v.Term != 0 && string(v.Value) != want:
			t.Fatalf("got %s after %s, want %q with a higher term", show(v), show(last), want)
		case v.Term != 0:
			return v
		}
		last = v
	}
}

// TestKilledLeader: a leader's process dies by kill -9. With nobody in line,
// an observer learns of it when the dead leader's lease runs out (nothing
// announces it); with a candidate in line, that candidate leads once the
// lease has run out, with a higher term, and the observer sees it after the
// dead leader, in order.
func TestKilledLeader(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		count := redistest.Count(b.Client)
		l := newLocker(t, b, correctness.WithAudit(false))
		seen, err := l.Observe(ctx, "killed")
		if err != nil {
			t.Fatal(err)
		}
		none := next(t, seen)
		const ttl = time.Second
		// kill starts a leader child, queues the candidates of line behind
		// it, and kills it.
		kill := func(value string, line func()) uint64 {
			child, term := startCandidate(t, b, candidateConfig{Name: "killed", TTL: ttl, Value: value})
			if v := observed(t, seen, none, value); v.Term != term {
				t.Fatalf("the observer saw %s with term %d, Campaign gave it %d", value, v.Term, term)
			}
			line()
			if err := syscall.Kill(child.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			return term
		}

		alone := kill("alone", func() {})
		b.Advance(ttl) // miniredis: the dead leader's lease runs out
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("after the leader died alone: got %s, want none", show(v))
		}
		if _, err := l.Leader(ctx, "killed"); !errors.Is(err, correctness.ErrNoLeader) {
			t.Fatalf("Leader after the leader died alone: got %v, want ErrNoLeader", err)
		}

		var c *candidate
		childTerm := kill("child", func() {
			c = campaign(ctx, l, "killed", time.Minute, "parent")
			count.Await(t, "wait", 1)
		})
		if childTerm <= alone {
			t.Fatalf("the second leader's term %d, want above %d", childTerm, alone)
		}
		b.Advance(ttl)
		term := c.term(t)
		if term <= childTerm {
			t.Fatalf("the successor's term %d, want above the dead leader's %d", term, childTerm)
		}
		if v := observed(t, seen, correctness.Leader{Value: []byte("child"), Term: childTerm}, "parent"); v.Term != term {
			t.Fatalf("the observer saw the successor with term %d, Campaign gave it %d", v.Term, term)
		}
		if err := c.end(t); err != nil {
			t.Fatal(err)
		}
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("after the successor resigned: got %s, want none", show(v))
		}
	})
}

// TestPausedLeaderIsDeposed: the leader's process is frozen (SIGSTOP) past its
// lease; the next candidate leads with a higher term and writes through a
// Register, ExecFenced and a FencingProxy; resumed, the old leader writes with
// its old term as a leader that checked before its pause would, and every fence
// refuses it. Its term ends (ErrLockLost), and the observer saw each leader
// once, in order.
func TestPausedLeaderIsDeposed(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		count := redistest.Count(b.Client)
		dbPath := filepath.Join(t.TempDir(), "fence.db")
		db, err := sqltest.OpenFile(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, sqltest.Schema); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, sqltest.CreateRow, "paused"); err != nil {
			t.Fatal(err)
		}
		proxy := httptest.NewServer(correctness.NewFencingProxy(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		defer proxy.Close()
		l := newLocker(t, b, correctness.WithAudit(false))
		seen, err := l.Observe(ctx, "paused")
		if err != nil {
			t.Fatal(err)
		}
		none := next(t, seen)
		const ttl = 500 * time.Millisecond
		child, childTerm := startCandidate(t, b, candidateConfig{Name: "paused", TTL: ttl, Value: "child", DB: dbPath, Proxy: proxy.URL})
		childLeader := observed(t, seen, none, "child")
		c := campaign(ctx, l, "paused", time.Minute, "parent")
		count.Await(t, "wait", 1)

		child.Stop()
		b.Advance(ttl) // miniredis: the frozen leader's lease runs out
		term := c.term(t)
		if term <= childTerm {
			t.Fatalf("the successor's term %d, want above the frozen leader's %d", term, childTerm)
		}
		if err := correctness.NewRegister(b.Client).Write(ctx, "paused", term, []byte("parent")); err != nil {
			t.Fatalf("the leader's Register write: %v", err)
		}
		if err := correctness.ExecFenced(ctx, db, sqltest.Update, "parent", correctness.TokenArg(term), "paused"); err != nil {
			t.Fatalf("the leader's SQL write: %v", err)
		}
		if got := httpWrite(proxy.URL+"/paused", term); got != "200" {
			t.Fatalf("the leader's write through the proxy: got %s, want 200", got)
		}
		child.Send("write") // read by the child only once it runs again
		child.Continue()
		said := map[string]bool{}
		for len(said) < 4 {
			line := child.Line(electionWait)
			word, _, _ := strings.Cut(line, " ")
			said[word] = true
			switch word {
			case "register":
				if want := fmt.Sprintf("register stale %d %d", childTerm, term); line != want {
					t.Fatalf("the deposed leader's Register write: got %q, want %q", line, want)
				}
			case "sql":
				if line != "sql stale" {
					t.Fatalf("the deposed leader's SQL write: got %q, want %q", line, "sql stale")
				}
			case "http":
				if line != "http 409" {
					t.Fatalf("the deposed leader's write through the proxy: got %q, want %q", line, "http 409")
				}
			case "lost":
			default:
				t.Fatalf("the deposed leader said %q", line)
			}
		}
		child.Send("resign")
		if line := child.Line(electionWait); !strings.HasPrefix(line, "done ") || !strings.Contains(line, "lock lost") {
			t.Fatalf("the deposed leader's Campaign: got %q, want ErrLockLost", line)
		}
		if v, tok, err := correctness.NewRegister(b.Client).Read(ctx, "paused"); err != nil || string(v) != "parent" || tok != term {
			t.Fatalf("the register holds %q, %d, %v; want the leader's write", v, tok, err)
		}
		if v, tok := sqltest.Read(t, db, "paused"); v != "parent" || tok != term {
			t.Fatalf("the row holds %q, %d; want the leader's write", v, tok)
		}
		if v := observed(t, seen, childLeader, "parent"); v.Term != term {
			t.Fatalf("the observer saw the successor with term %d, Campaign gave it %d", v.Term, term)
		}
		if err := c.end(t); err != nil {
			t.Fatal(err)
		}
	})
}
