package model

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// backend is a Redis the checker drives: miniredis in-process with a
// controlled clock (mini), or a real redis-server (real.go).
type backend interface {
	// step runs cmd and returns the server's state just before and just
	// after it, and its reply (an error reply as an error value).
	step(cmd []string) (before, after redisState, reply any)
	// read returns the server's state.
	read() redisState
	// published returns the messages published since the last call, in
	// order, and forgets them.
	published() []published
	// publish publishes msg on ch, as anyone may.
	publish(ch, msg string)
	// advance lets time pass until the clock reads to (ms).
	advance(to int64)
	// restart makes the server lose every key, as a restart without
	// persistence does, after gap ms.
	restart(gap int64)
	// shift steps the server's clock by d ms (back when d < 0), as an
	// operator or NTP setting it does.
	shift(d int64)
	// subscribe subscribes ch (on) or drops its subscriber.
	subscribe(ch string, on bool)
	close()
}

// mini is a miniredis driven in-process: commands are dispatched to it
// without a network, its clock moves only when the checker moves it (TIME
// in a script follows it), and PUBLISH is captured rather than delivered.
// Its subscribers are miniredis's own, so that PUBSUB NUMSUB counts them.
// A state can be loaded into it (load): the explorer rebuilds each state it
// expands rather than replaying the path to it, which costs a script run
// per step.
type mini struct {
	m      *miniredis.Miniredis
	lua    *luaRunner // nil: miniredis's own EVAL
	names  []string   // the keys read
	marks  string     // and every key whose name starts with it
	subs   map[string]*miniredis.Subscriber
	clock  int64 // ms
	micros int64 // what TIME reads
	pubs   []published
}

// newMini starts a miniredis with its clock at clock (ms); the checker reads
// the keys called names, and those whose names start with marks. Scripts
// run in a luaRunner, or with native in miniredis's own EVAL.
func newMini(names []string, marks string, clock int64, native bool) (*mini, error) {
	m := miniredis.NewMiniRedis()
	conn, err := m.Dial() // starts the server without a listener
	if err != nil {
		return nil, fmt.Errorf("model: starting miniredis: %w", err)
	}
	_ = conn.Close()
	s := &mini{m: m, names: names, marks: marks, subs: make(map[string]*miniredis.Subscriber)}
	s.setClock(clock, clock*1000+1)
	m.Server().SetPreHook(s.capture)
	if !native {
		s.lua = newLuaRunner(s.dispatch)
	}
	return s, nil
}

// capture takes every PUBLISH, from a script or not, into the checker's
// hands instead of the subscribers'.
func (s *mini) capture(p *server.Peer, cmd string, args ...string) bool {
	if cmd != "PUBLISH" || len(args) != 2 {
		return false
	}
	s.pubs = append(s.pubs, published{args[0], args[1]})
	p.WriteInt(0)
	return true
}

// do runs cmd and returns its reply as go-redis would.
func (s *mini) do(cmd []string) any {
	if s.lua != nil && cmd[0] == "EVAL" {
		return s.lua.eval(cmd[1:])
	}
	return normalize(s.dispatch(cmd))
}

// dispatch runs cmd and returns its reply as miniredis writes it (an error
// reply as an error).
func (s *mini) dispatch(cmd []string) any {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	s.m.Server().Dispatch(server.NewPeer(w), cmd)
	_ = w.Flush()
	reply, err := server.ParseReply(bufio.NewReader(&buf))
	if err != nil {
		return replyError{err.Error()}
	}
	return reply
}

func (s *mini) step(cmd []string) (before, after redisState, reply any) {
	before = s.read()
	reply = s.do(cmd)
	return before, s.read(), reply
}

func (s *mini) read() redisState {
	st := redisState{clock: s.clock, micros: s.micros}
	for _, name := range s.names {
		if k, ok := s.readKey(name); ok {
			st.keys = append(st.keys, k)
		}
	}
	for _, name := range s.m.Keys() { // sorted
		if strings.HasPrefix(name, s.marks) {
			if k, ok := s.readKey(name); ok {
				st.keys = append(st.keys, k)
			}
		}
	}
	for ch, sub := range s.subs {
		if sub.Count() > 0 {
			st.subs = append(st.subs, ch)
		}
	}
	slices.Sort(st.subs)
	return st
}

func (s *mini) readKey(name string) (rkey, bool) {
	k := rkey{name: name, typ: s.m.Type(name), ttl: -1}
	if d := s.m.TTL(name); d > 0 {
		k.ttl = d.Milliseconds()
	}
	switch k.typ {
	case "":
		return k, false
	case "string":
		v, _ := s.m.Get(name)
		k.items = []string{v}
	case "zset":
		k.items = zitems(s.m.SortedSet(name))
	case "hash":
		fields, _ := s.m.HKeys(name)
		sort.Strings(fields)
		for _, f := range fields {
			k.items = append(k.items, f, s.m.HGet(name, f))
		}
	}
	return k, true
}

// zitems are a sorted set's members and scores in ZRANGE order.
func zitems(z map[string]float64, _ error) []string {
	members := make([]string, 0, len(z))
	for m := range z {
		members = append(members, m)
	}
	sort.Slice(members, func(i, j int) bool {
		a, b := members[i], members[j]
		return z[a] < z[b] || z[a] == z[b] && a < b
	})
	items := make([]string, 0, 2*len(z))
	for _, m := range members {
		items = append(items, m, score(z[m]))
	}
	return items
}

// load makes the server hold st.
func (s *mini) load(st redisState) {
	s.m.FlushAll()
	s.setClock(st.clock, st.micros)
	for _, k := range st.keys {
		s.loadKey(k)
	}
	for ch := range s.subs {
		s.subscribe(ch, false)
	}
	for _, ch := range st.subs {
		s.subscribe(ch, true)
	}
	s.pubs = s.pubs[:0]
}

func (s *mini) loadKey(k rkey) {
	switch k.typ {
	case "string":
		_ = s.m.Set(k.name, k.items[0])
	case "zset":
		for i := 0; i+1 < len(k.items); i += 2 {
			f, _ := strconv.ParseFloat(k.items[i+1], 64)
			_, _ = s.m.ZAdd(k.name, f, k.items[i])
		}
	case "hash":
		s.m.HSet(k.name, k.items...)
	}
	if k.ttl > 0 {
		s.m.SetTTL(k.name, time.Duration(k.ttl)*time.Millisecond)
	}
}

func (s *mini) published() []published {
	p := slices.Clone(s.pubs)
	s.pubs = s.pubs[:0]
	return p
}

func (s *mini) publish(ch, msg string) { s.do([]string{"PUBLISH", ch, msg}) }

func (s *mini) advance(to int64) {
	if to <= s.clock {
		return
	}
	s.m.FastForward(time.Duration(to-s.clock) * time.Millisecond)
	s.setClock(to, to*1000+1)
}

// setClock sets the clock to ms, and what TIME reads to us. The checker
// keeps us off a round number (protocol.now): miniredis formats a sorted
// set's score the shortest way, and a round one in exponent form
// ("1.7e+15" where Redis says "1700000000000000"), which defeats the
// comparison by length and text that queue.lua's enqueue makes of places.
func (s *mini) setClock(ms, us int64) {
	s.clock, s.micros = ms, us
	s.m.SetTime(time.UnixMicro(us))
}

func (s *mini) restart(gap int64) {
	s.m.FlushAll()
	s.advance(s.clock + gap)
}

// shift steps the clock by d ms. Redis keeps a key's expiry as a time on
// its clock, not as a time left: a key due before the clock's new reading
// expires, and every other key's ttl changes by -d.
func (s *mini) shift(d int64) {
	st := s.read()
	st.clock += d
	st.micros = st.clock*1000 + 1
	keys := st.keys[:0:0]
	for _, k := range st.keys {
		if k.ttl >= 0 {
			if k.ttl -= d; k.ttl <= 0 {
				continue
			}
		}
		keys = append(keys, k)
	}
	st.keys = keys
	s.load(st)
}

func (s *mini) subscribe(ch string, on bool) {
	sub := s.subs[ch]
	if sub == nil {
		sub = s.m.NewSubscriber()
		s.subs[ch] = sub
	}
	if on {
		sub.Subscribe(ch)
	} else {
		sub.Unsubscribe(ch)
	}
}

func (s *mini) close() { s.m.Close() }

// replyError is an error reply.
type replyError struct{ msg string }

func (e replyError) Error() string { return e.msg }

// normalize turns a reply into the types go-redis returns: int64, string,
// nil, []any, or an error.
func normalize(v any) any {
	switch r := v.(type) {
	case int:
		return int64(r)
	case server.Simple:
		return string(r)
	case []any:
		out := make([]any, len(r))
		for i, e := range r {
			out[i] = normalize(e)
		}
		return out
	case error:
		var re replyError
		if errors.As(r, &re) {
			return re
		}
		return replyError{r.Error()}
	}
	return v
}
