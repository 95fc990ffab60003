package scripts_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// TestStates holds the tables of docs/protocol.md against the scripts: for
// each row of a table of moves it sets up the row's state, checks that it
// reads as that state, makes the row's move and checks the state it left,
// on miniredis and on redis-server. A move the table lists that a script
// stopped making fails its row; a row the test cannot make, or a move the
// test can make that no row lists, fails too.
func TestStates(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("lock", func(t *testing.T) {
		states := column(t, tableAfter(t, doc, "## A lock's states"))
		testMoves(t, tableAfter(t, doc, "## A lock's moves"), states, lockMoves, newLockEnv)
	})
	t.Run("permit", func(t *testing.T) {
		states := column(t, tableAfter(t, doc, "## A permit's states"))
		testMoves(t, tableAfter(t, doc, "## A permit's moves"), states, permitMoves, newPermitEnv)
	})
}

// env is one row's world: it sets up a state, and reads the state a move
// left, with the owner whose grant holds the lock ("" for a permit).
type env interface {
	set(state string)
	state() (state, holder string)
}

// testMoves runs each row of a table of moves: from, script, "by, when",
// to, and for a lock the holder after. moves makes each move by the script
// and "by, when" it is listed under; the time that passes is script "—".
func testMoves[E env](t *testing.T, rows [][]string, states []string, moves map[string]func(E), newEnv func(*testing.T, *redistest.Backend, time.Duration) E) {
	used := map[string]bool{}
	for _, r := range rows {
		from, script, when, to := r[0], r[1], r[2], r[3]
		holder := ""
		if len(r) > 4 {
			holder = strings.TrimPrefix(r[4], "—")
		}
		for _, s := range []string{from, to} {
			if !slices.Contains(states, s) {
				t.Errorf("row %q: %q is no state the table of states lists (%v)", r, s, states)
			}
		}
		move, ok := moves[script+"|"+when]
		if !ok {
			t.Errorf("row %q: the test knows no move by %s %q", r, script, when)
			continue
		}
		used[script+"|"+when] = true
		// A move that waits for time to pass runs on a short lease.
		lease := time.Minute
		if script == "—" {
			lease = 300 * time.Millisecond
		}
		t.Run(from+" "+script+" "+when, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				e := newEnv(t, b, lease)
				e.set(from)
				if got, _ := e.state(); got != from {
					t.Fatalf("set up as %s, the keys read as %s", from, got)
				}
				move(e)
				if got, by := e.state(); got != to || by != holder {
					t.Fatalf("got %s (holder %q), want %s (holder %q)", got, by, to, holder)
				}
			})
		})
	}
	for m := range moves {
		if !used[m] {
			t.Errorf("no row lists the move by %q", m)
		}
	}
}

// tableAfter returns the cells of the rows of the first table after the
// line heading in doc, without its header and separator, and without the
// backticks of code.
func tableAfter(t *testing.T, doc []byte, heading string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/protocol.md has no heading %q", heading)
	}
	var rows [][]string
	for line := range strings.SplitSeq(rest, "\n") {
		switch {
		case strings.HasPrefix(line, "|"):
			var cells []string
			for c := range strings.SplitSeq(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.ReplaceAll(strings.TrimSpace(c), "`", ""))
			}
			rows = append(rows, cells)
		case len(rows) > 0:
			if len(rows) < 3 {
				t.Fatalf("the table after %q has no rows", heading)
			}
			return rows[2:]
		}
	}
	t.Fatalf("no table after %q", heading)
	return nil
}

// column is the first cell of each row.
func column(t *testing.T, rows [][]string) []string {
	t.Helper()
	var c []string
	for _, r := range rows {
		c = append(c, r[0])
	}
	return c
}

// A lock's world: the holder's grant "holder:7" (the counter at 7), a caller,
// a live waiter, dead waiters; grants of kind 'f'.
type lockEnv struct {
	t     *testing.T
	b     *redistest.Backend
	lease time.Duration
}

func newLockEnv(t *testing.T, b *redistest.Backend, lease time.Duration) *lockEnv {
	b.Client.Set(t.Context(), "lock:fence", "7", 0)
	return &lockEnv{t: t, b: b, lease: lease}
}

// set stores the value of a lock in state, as the scripts would.
func (e *lockEnv) set(state string) {
	ctx, lease, now := e.t.Context(), e.lease.Milliseconds(), serverMicros(e.t, e.b.Client)/1000
	var err error
	switch state {
	case "free":
	case "held":
		err = e.b.Client.Set(ctx, "lock", "holder:7", e.lease).Err()
	case "marked":
		err = e.b.Client.Set(ctx, "lock", "holder:7*"+strconv.FormatInt(now+lease, 10), e.lease+linger).Err()
	case "lapsed":
		err = e.b.Client.Set(ctx, "lock", "holder:7*"+strconv.FormatInt(now-1, 10), linger).Err()
	case "vacant":
		err = e.b.Client.Set(ctx, "lock", "*0", linger).Err()
	default:
		e.t.Fatalf("no such state of a lock: %q", state)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// linger is scripts.Linger.
const linger = scripts.Linger

// state reads the lock's state and the owner of the grant it holds; and
// checks that a key with the mark of waiters outlives its lease by at most
// Linger (100 ms more for the script's own run: Redis 7.0 counts a PX from
// the command, a lease from the TIME read at the script's start).
func (e *lockEnv) state() (string, string) {
	ctx := e.t.Context()
	v, err := e.b.Client.Get(ctx, "lock").Result()
	if errors.Is(err, redis.Nil) {
		return "free", ""
	} else if err != nil {
		e.t.Fatal(err)
	}
	grant, mark, marked := strings.Cut(v, "*")
	owner, _, _ := strings.Cut(grant, ":")
	if !marked {
		return "held", owner
	}
	expiry, err := strconv.ParseInt(mark, 10, 64)
	if err != nil {
		e.t.Fatalf("the lock holds %q: the mark records no expiry", v)
	}
	left := max(expiry-serverMicros(e.t, e.b.Client)/1000, 0)
	key := e.b.Client.PTTL(ctx, "lock").Val().Milliseconds()
	if key <= left || key > left+linger.Milliseconds()+100 {
		e.t.Fatalf("the lock holds %q, %d ms left of its lease, and its key %d ms: want the key to outlive the lease by Linger at most", v, left, key)
	}
	switch {
	case grant == "" && expiry == 0:
		return "vacant", ""
	case left == 0:
		return "lapsed", owner
	}
	return "marked", owner
}

// run runs script on the lock's keys, failing the test on an error reply.
func (e *lockEnv) run(s *scripts.Script, keys []string, args ...any) {
	e.t.Helper()
	if err := redistest.Script(s).Run(e.t.Context(), e.b.Client, keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		e.t.Fatalf("%v", err)
	}
}

// queue queues n dead waiters and then, with live, the live one, "waiter".
func (e *lockEnv) queue(n int, live bool) {
	for i := range n {
		e.b.Client.ZAdd(e.t.Context(), "lock:queue", redis.Z{Score: float64(i + 1), Member: entryOf("dead"+strconv.Itoa(i), "f", 0, 0, "gone")})
	}
	if live {
		subscribe(e.t, e.b.Client, "chan-waiter")
		e.b.Client.ZAdd(e.t.Context(), "lock:queue", redis.Z{Score: float64(n + 1), Member: entryOf("waiter", "f", 0, 0, "chan-waiter")})
	}
}

func (e *lockEnv) acquire() {
	e.run(scripts.FencedAcquire, lockKeys, "caller", e.lease.Milliseconds(), "f")
}

func (e *lockEnv) wait() {
	e.run(scripts.Wait, lockKeys, "caller", e.lease.Milliseconds(), "f", entryOf("caller", "f", 0, 0, "chan-caller"), "", "")
}

func (e *lockEnv) release(value string) { e.run(scripts.Release, lockKeys, value, "0", "", "0") }

func (e *lockEnv) pass() { e.b.Pass(e.lease + 100*time.Millisecond) }

// lockMoves are the moves of docs/protocol.md's table of a lock's moves, by
// script and "by, when".
var lockMoves = map[string]func(e *lockEnv){
	"SET NX PX|an efficiency acquire": func(e *lockEnv) {
		e.b.Client.SetNX(e.t.Context(), "lock", "caller", e.lease)
	},
	"fenced_acquire|a correctness acquire":         (*lockEnv).acquire,
	"fenced_acquire|the caller":                    (*lockEnv).acquire,
	"wait|the caller, nobody queued":               (*lockEnv).wait,
	"wait|the caller, queueing":                    (*lockEnv).wait,
	"wait|the caller, a live waiter queued":        func(e *lockEnv) { e.queue(0, true); e.wait() },
	"wait|the caller, only dead waiters queued":    func(e *lockEnv) { e.queue(3, false); e.wait() },
	"refresh|the holder":                           func(e *lockEnv) { e.run(scripts.Refresh, lockKeys[:1], "holder:7", e.lease.Milliseconds()) },
	"release|the holder":                           func(e *lockEnv) { e.release("holder:7") },
	"release|the holder, after its lease ended":    func(e *lockEnv) { e.release("holder:7") },
	"release|the caller":                           func(e *lockEnv) { e.release("caller:1") },
	"release|the holder, a live waiter queued":     func(e *lockEnv) { e.queue(0, true); e.release("holder:7") },
	"release|the holder, only dead waiters queued": func(e *lockEnv) { e.queue(3, false); e.release("holder:7") },
	"release|the holder, over a hundred dead waiters ahead of a live one": func(e *lockEnv) {
		e.queue(150, true)
		e.release("holder:7")
	},
	"release|the releaser going on, a live waiter queued": func(e *lockEnv) { e.queue(0, true); e.release("") },
	"release|an operator's break": func(e *lockEnv) {
		e.run(scripts.Release, lockKeys, "holder:7", "2", "", "0", "", "10000")
	},
	"—|the lease's ttl passes":    (*lockEnv).pass,
	"—|the lease's expiry passes": (*lockEnv).pass,
}

// A permit's world: a semaphore of limit 1, "owner", whose permit a row
// follows (its waiter live, on chan-owner), and "other".
type permitEnv struct {
	t     *testing.T
	b     *redistest.Backend
	lease time.Duration
	place string // where the owner queued
}

func newPermitEnv(t *testing.T, b *redistest.Backend, lease time.Duration) *permitEnv {
	subscribe(t, b.Client, "chan-owner")
	return &permitEnv{t: t, b: b, lease: lease}
}

// ownerEntry is the owner's queue entry of generation gen.
func ownerEntry(gen int) string { return entryOf("owner", "e", 0, gen, "chan-owner") }

// set makes the owner's permit be in state, by the scripts.
func (e *permitEnv) set(state string) {
	switch state {
	case "none":
	case "queued":
		e.acquire("other")
		reply := e.run(scripts.SemWait, "owner", e.lease.Milliseconds(), "1", ownerEntry(0), "", "", "0")
		if r, _ := reply.([]any); len(r) == 4 {
			e.place, _ = r[2].(string)
		}
	case "live":
		e.acquire("owner")
	case "expired":
		e.acquire("owner")
		e.expire("owner")
	default:
		e.t.Fatalf("no such state of a permit: %q", state)
	}
}

// state reads the owner's permit's state, once it has checked that no more
// than the limit of permits are live.
func (e *permitEnv) state() (string, string) {
	ctx := e.t.Context()
	now := float64(serverMicros(e.t, e.b.Client) / 1000)
	live := 0
	for _, z := range e.b.Client.ZRangeWithScores(ctx, "sem", 0, -1).Val() {
		if z.Score > now {
			live++
		}
	}
	if live > 1 {
		e.t.Fatalf("%d permits live, with limit 1", live)
	}
	score, err := e.b.Client.ZScore(ctx, "sem", "owner").Result()
	switch {
	case err == nil && score > now:
		return "live", ""
	case err == nil:
		return "expired", ""
	case !errors.Is(err, redis.Nil):
		e.t.Fatal(err)
	}
	for _, entry := range e.b.Client.ZRange(ctx, "sem:queue", 0, -1).Val() {
		if strings.HasPrefix(entry, "owner ") {
			return "queued", ""
		}
	}
	return "none", ""
}

// run runs script on the semaphore's keys, failing the test on an error
// reply, and returns its reply.
func (e *permitEnv) run(s *scripts.Script, args ...any) any {
	e.t.Helper()
	reply, err := redistest.Script(s).Run(e.t.Context(), e.b.Client, semKeys, args...).Result()
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	return reply
}

func (e *permitEnv) acquire(owner string) {
	e.run(scripts.SemAcquire, owner, e.lease.Milliseconds(), "1", "0")
}

func (e *permitEnv) release(owner, leaving string) {
	e.run(scripts.SemRelease, owner, "0", leaving, "0")
}

// expire makes owner's permit expire now, as its ttl running out would.
func (e *permitEnv) expire(owner string) {
	now := serverMicros(e.t, e.b.Client) / 1000
	if err := e.b.Client.ZAddXX(e.t.Context(), "sem", redis.Z{Score: float64(now - 1), Member: owner}).Err(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *permitEnv) wait(place, prev string) {
	e.run(scripts.SemWait, "owner", e.lease.Milliseconds(), "1", ownerEntry(1), place, prev, "0")
}

// permitMoves are the moves of docs/protocol.md's table of a permit's
// moves, by script and "by, when".
var permitMoves = map[string]func(e *permitEnv){
	"sem_acquire|the owner, the permit free":              func(e *permitEnv) { e.acquire("owner") },
	"sem_acquire|the owner, the other holding the permit": func(e *permitEnv) { e.acquire("other"); e.acquire("owner") },
	"sem_wait|the owner, the permit free":                 func(e *permitEnv) { e.wait("", "") },
	"sem_wait|the owner, the other holding the permit":    func(e *permitEnv) { e.acquire("other"); e.wait("", "") },
	"sem_release|the other":                               func(e *permitEnv) { e.release("other", "") },
	"sem_wait|the owner, the other's permit expired": func(e *permitEnv) {
		e.expire("other")
		e.wait(e.place, ownerEntry(0))
	},
	"sem_release|the owner, giving up": func(e *permitEnv) { e.release("owner", ownerEntry(0)) },
	"sem_acquire|the owner":            func(e *permitEnv) { e.acquire("owner") },
	"sem_acquire|the other":            func(e *permitEnv) { e.acquire("other") },
	"sem_refresh|the owner":            func(e *permitEnv) { e.run(scripts.SemRefresh, "owner", e.lease.Milliseconds()) },
	"sem_release|the owner":            func(e *permitEnv) { e.release("owner", "") },
	"—|the permit's ttl passes":        func(e *permitEnv) { e.b.Pass(e.lease + 100*time.Millisecond) },
}
