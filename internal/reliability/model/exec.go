package model

import (
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
)

// op is one operation on the server: a command, or a change of its
// environment (time, a restart, a subscription, a publish).
type op struct {
	key string // names it for the memo
	cmd []string
	act func(backend)
}

// commandOp is cmd. Its key names a script by a digest of its source, so
// that a key costs no copy of the source.
func commandOp(cmd []string) op {
	var b strings.Builder
	for i, a := range cmd {
		if i == 1 && cmd[0] == "EVAL" {
			a = strconv.FormatUint(maphash.String(sourceSeed, a), 36)
		}
		b.WriteString(a)
		b.WriteByte(0)
	}
	return op{key: b.String(), cmd: cmd}
}

var sourceSeed = maphash.MakeSeed()

func advanceOp(to int64) op {
	return op{key: "advance " + strconv.FormatInt(to, 10), act: func(b backend) { b.advance(to) }}
}

// stepOp steps the server's clock by d ms (back when d < 0).
func stepOp(d int64) op {
	return op{key: "step " + strconv.FormatInt(d, 10), act: func(b backend) { b.shift(d) }}
}

func restartOp(gap int64) op {
	return op{key: "restart", act: func(b backend) { b.restart(gap) }}
}

func subscribeOp(ch string, on bool) op {
	return op{key: "subscribe " + ch + " " + strconv.FormatBool(on), act: func(b backend) { b.subscribe(ch, on) }}
}

func publishOp(ch, msg string) op {
	return op{key: "publish " + ch + "\x00" + msg, act: func(b backend) { b.publish(ch, msg) }}
}

// result is what an op did.
type result struct {
	before, after redisState
	reply         any
	pubs          []published
}

// executor runs ops for one explorer worker or replay. On miniredis it
// loads the state an op starts from when the server holds another, and
// remembers results (memo): an op on equal states does the same, since
// miniredis's clock moves only when the checker moves it. On a real server
// it runs each op on whatever the server holds.
type executor struct {
	b      backend
	mini   *mini // nil on a real server
	memo   *memo
	loaded string // the encoded state mini holds, or ""
	runs   int    // ops run on the server (not from the memo)
}

func (x *executor) run(st redisState, o op) result {
	if x.mini == nil {
		return x.live(o)
	}
	key := string(st.encode(nil))
	mk := x.memo.key(key, o.key)
	if r, ok := x.memo.get(mk); ok {
		return r
	}
	if x.loaded != key {
		x.mini.load(st)
	}
	r := x.live(o)
	x.loaded = string(r.after.encode(nil))
	x.memo.put(mk, r)
	return r
}

// settle is st as a world states it once a move is over: on miniredis
// with what TIME will read next, us (a function of the world, so that equal
// worlds encode equally); a real server's clock is its own.
func (x *executor) settle(st redisState, us int64) redisState {
	if x.mini != nil {
		st.micros = us
	}
	return st
}

// live runs o on the server as it is.
func (x *executor) live(o op) result {
	x.runs++
	var r result
	if o.cmd != nil {
		r.before, r.after, r.reply = x.b.step(o.cmd)
	} else {
		r.before = x.b.read()
		o.act(x.b)
		r.after = x.b.read()
	}
	r.pubs = x.b.published()
	return r
}

// memo remembers the results of ops on states, up to a bound.
type memo struct {
	seeds [2]maphash.Seed
	mu    sync.Mutex
	m     map[[2]uint64]result
	limit int
}

func newMemo(limit int) *memo {
	return &memo{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, m: make(map[[2]uint64]result), limit: limit}
}

func (m *memo) key(state, op string) [2]uint64 {
	var k [2]uint64
	for i, seed := range m.seeds {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(state)
		h.WriteByte(0)
		h.WriteString(op)
		k[i] = h.Sum64()
	}
	return k
}

func (m *memo) get(k [2]uint64) (result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.m[k]
	return r, ok
}

func (m *memo) put(k [2]uint64, r result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) < m.limit {
		m.m[k] = r
	}
}
