package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// real is a redis-server the checker drives through go-redis, for replays:
// its clock is the wall clock, so advancing it is a sleep, and it cannot
// load a state. Each participant's subscription is a connection of its own
// (PUBSUB NUMSUB counts it, and closing it ends it); what is published on
// them is gathered after each operation by publishing a marker behind it.
type real struct {
	ctx   context.Context
	c     *redis.Client
	names []string
	marks string // the prefix of the other keys read: the marks
	subs  map[string]*redis.PubSub
	// gap, when set, is how far the clock moves at the next advance, ms:
	// the replay sets it to miniredis's step (see advance).
	gap int64
	// noDelex says the server has no DELEX (Redis before 8.4): a plain
	// release's DELEX runs as its equivalent script (plain.go).
	noDelex bool
}

// wait bounds how long a replay waits for the server to do what it surely
// will (confirm a subscription, deliver a message): an event, not a timing.
const wait = 10 * time.Second

// newReal drives the server c is connected to, which it empties first
// (FLUSHALL SYNC: Valkey's lazyfree-lazy-user-flush would otherwise free the
// keys in the background, as the replay runs).
func newReal(ctx context.Context, c *redis.Client, names []string, marks string) (*real, error) {
	if err := c.Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
		return nil, fmt.Errorf("model: FLUSHALL: %w", err)
	}
	// COMMAND INFO answers nil for a command the server lacks.
	info, err := c.Do(ctx, "COMMAND", "INFO", "DELEX").Slice()
	if err != nil {
		return nil, fmt.Errorf("model: COMMAND INFO: %w", err)
	}
	return &real{ctx: ctx, c: c, names: names, marks: marks, subs: make(map[string]*redis.PubSub),
		noDelex: len(info) != 1 || info[0] == nil}, nil
}

// snapshot reads the clock and the keys in one step, the same on every
// server: {seconds, µs, {name, type, pttl, items}...}; the keys are KEYS,
// then those that match the pattern ARGV[1], sorted.
var snapshot = redis.NewScript(`
local t = redis.call('TIME')
local out = {t[1], t[2]}
local names = {}
for _, k in ipairs(KEYS) do
  names[#names + 1] = k
end
local marks = redis.call('KEYS', ARGV[1])
table.sort(marks)
for _, k in ipairs(marks) do
  names[#names + 1] = k
end
for _, k in ipairs(names) do
  local typ = redis.call('TYPE', k)['ok']
  local items = {}
  if typ == 'string' then
    items = {redis.call('GET', k)}
  elseif typ == 'zset' then
    items = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  elseif typ == 'hash' then
    items = redis.call('HGETALL', k)
  end
  if typ ~= 'none' then
    out[#out + 1] = {k, typ, redis.call('PTTL', k), items}
  end
end
return out`)

func (s *real) step(cmd []string) (before, after redisState, reply any) {
	if s.noDelex && len(cmd) == 4 && cmd[0] == "DELEX" && cmd[2] == "IFEQ" {
		cmd = []string{"EVAL", delexIFEQ, "1", cmd[1], cmd[3]}
	}
	var read1, read2 *redis.Cmd
	var run *redis.Cmd
	args := make([]any, len(cmd))
	for i, a := range cmd {
		args[i] = a
	}
	_, _ = s.c.TxPipelined(s.ctx, func(p redis.Pipeliner) error {
		read1 = snapshot.Eval(s.ctx, p, s.names, s.marks+"*")
		run = p.Do(s.ctx, args...)
		read2 = snapshot.Eval(s.ctx, p, s.names, s.marks+"*")
		return nil
	})
	return s.parse(read1), s.parse(read2), fromGoRedis(run.Result())
}

func (s *real) read() redisState {
	return s.parse(snapshot.Run(s.ctx, s.c, s.names, s.marks+"*"))
}

// parse reads a snapshot; a failed one panics: a replay cannot go on.
func (s *real) parse(cmd *redis.Cmd) redisState {
	r, err := cmd.Slice()
	if err != nil || len(r) < 2 {
		panic(fmt.Sprintf("model: reading the server: %v %v", r, err))
	}
	sec, _ := strconv.ParseInt(r[0].(string), 10, 64)
	usec, _ := strconv.ParseInt(r[1].(string), 10, 64)
	st := redisState{micros: sec*1_000_000 + usec}
	st.clock = st.micros / 1000
	for _, e := range r[2:] {
		st.keys = append(st.keys, parseKey(e.([]any)))
	}
	slices.SortStableFunc(st.keys, func(a, b rkey) int { return s.order(a.name) - s.order(b.name) })
	for ch := range s.subs {
		st.subs = append(st.subs, ch)
	}
	slices.Sort(st.subs)
	return st
}

// order is where the key called name comes in a state: names first, in
// their order, then the marks (sorted by the snapshot already).
func (s *real) order(name string) int {
	if i := slices.Index(s.names, name); i >= 0 {
		return i
	}
	return len(s.names)
}

func parseKey(e []any) rkey {
	k := rkey{name: e[0].(string), typ: e[1].(string), ttl: e[2].(int64)}
	for _, it := range e[3].([]any) {
		k.items = append(k.items, it.(string))
	}
	switch k.typ {
	case "zset":
		for i := 1; i < len(k.items); i += 2 {
			f, _ := strconv.ParseFloat(k.items[i], 64)
			k.items[i] = score(f)
		}
	case "hash":
		sortFields(k.items)
	}
	return k
}

// sortFields sorts a hash's fields and values by field.
func sortFields(items []string) {
	type pair struct{ f, v string }
	ps := make([]pair, len(items)/2)
	for i := range ps {
		ps[i] = pair{items[2*i], items[2*i+1]}
	}
	slices.SortFunc(ps, func(a, b pair) int { return strings.Compare(a.f, b.f) })
	for i, p := range ps {
		items[2*i], items[2*i+1] = p.f, p.v
	}
}

// fromGoRedis turns a go-redis result into a reply as mini's.
func fromGoRedis(v any, err error) any {
	var re redis.Error
	switch {
	case errors.Is(err, redis.Nil):
		return nil
	case errors.As(err, &re):
		return replyError{re.Error()}
	case err != nil:
		panic(fmt.Sprintf("model: the server failed: %v", err))
	}
	return v
}

// marker is published behind an operation on every subscribed channel:
// the messages received before it are the operation's.
const marker = "~"

func (s *real) published() []published {
	var out []published
	chans := make([]string, 0, len(s.subs))
	for ch := range s.subs {
		chans = append(chans, ch)
	}
	slices.Sort(chans)
	for _, ch := range chans {
		if err := s.c.Publish(s.ctx, ch, marker).Err(); err != nil {
			panic(fmt.Sprintf("model: PUBLISH: %v", err))
		}
		ctx, cancel := context.WithTimeout(s.ctx, wait)
		for {
			m, err := s.subs[ch].ReceiveMessage(ctx)
			if err != nil {
				panic(fmt.Sprintf("model: receiving on %s: %v", ch, err))
			}
			if m.Payload == marker {
				break
			}
			out = append(out, published{ch, m.Payload})
		}
		cancel()
	}
	return out
}

func (s *real) publish(ch, msg string) {
	if err := s.c.Publish(s.ctx, ch, msg).Err(); err != nil {
		panic(fmt.Sprintf("model: PUBLISH: %v", err))
	}
}

// advance sleeps until the server's clock is past to: keys due then have
// expired (Redis expires a key once its time has passed). With a gap set,
// it sleeps that long from now instead, plus the same 2 ms: the moves since
// the clock last moved took real time, so deadlines that fall together on
// miniredis's clock (a waiter's timer and the lease it waits for) fall
// apart by as much on a real one, and the earliest of them is not enough.
// Every deadline set since is no later than now plus its own length.
func (s *real) advance(to int64) {
	d := to - s.read().clock
	if s.gap > 0 {
		d, s.gap = s.gap, 0
	}
	if d >= 0 {
		time.Sleep(time.Duration(d+2) * time.Millisecond)
	}
}

func (s *real) restart(gap int64) {
	if err := s.c.Do(s.ctx, "FLUSHALL", "SYNC").Err(); err != nil {
		panic(fmt.Sprintf("model: FLUSHALL: %v", err))
	}
	time.Sleep(time.Duration(gap) * time.Millisecond)
}

// shift cannot step a real server's clock, which is its host's.
func (s *real) shift(int64) { panic("model: a replay cannot step redis-server's clock") }

func (s *real) subscribe(ch string, on bool) {
	if on {
		ps := s.c.Subscribe(s.ctx, ch)
		ctx, cancel := context.WithTimeout(s.ctx, wait)
		defer cancel()
		if _, err := ps.ReceiveTimeout(ctx, wait); err != nil {
			panic(fmt.Sprintf("model: SUBSCRIBE %s: %v", ch, err))
		}
		s.subs[ch] = ps
		return
	}
	if ps := s.subs[ch]; ps != nil {
		_ = ps.Close()
		delete(s.subs, ch)
		s.unsubscribed(ch)
	}
}

// unsubscribed waits until the server has seen a subscription's
// connection close: PUBSUB NUMSUB says so.
func (s *real) unsubscribed(ch string) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		n, err := s.c.PubSubNumSub(s.ctx, ch).Result()
		if err == nil && n[ch] == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	panic("model: the server still counts a closed subscription to " + ch)
}

func (s *real) close() {
	for _, ps := range s.subs {
		_ = ps.Close()
	}
}
