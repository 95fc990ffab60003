package lease

import (
	"sync"
	"time"

	"github.com/leasekit/leasekit/scripts"
)

// strays are the queue entries of a Core's waiters that gave up while Redis
// could not take their entries out of the queue (it was slow or down, or the
// process was starved): while the Core is subscribed, a release may still
// hand such an entry the lock. The Core releases such a grant the moment it
// hears of it, and takes the entries out of their queues once Redis answers,
// so a stray costs the lock a round trip, never a ttl.
type strays struct {
	c       *Core
	mu      sync.Mutex
	m       map[string]*stray // by the entry's id
	taken   map[string]*took  // by the entry's id
	tookIDs []string          // the ids in taken, oldest first
	closed  bool
	running bool
	done    chan struct{} // closed by close
	wg      sync.WaitGroup
}

// stray is a waiter that gave up, and its entry.
type stray struct {
	a     *acquire
	entry *entry
}

// took is a waiter that left with a grant a message handed it: anyone who
// may PUBLISH can send such a message, and nothing read the key before the
// waiter took it. If it was forged, the waiter's entry is still queued, and
// a later release hands the lock to it: a grant message for a waiter that
// left already, which would otherwise wait out its ttl. So the Core keeps,
// for each, what it took; a grant message that names it later is released
// at once, unless it is the grant the waiter holds (the same message again,
// or, for an efficiency lock, whose grants of one owner are all alike, the
// real handoff of the grant a forged message announced early).
type took struct {
	a     *acquire
	value string
	h     *Held
	at    time.Time
}

// tookFor bounds how long a took is kept after its lease is over: an entry
// outlives its waiter's last try by at most the queue's life, a holder's
// ttl plus Linger.
func tookFor(ttl time.Duration) time.Duration { return ttl + Linger }

// maxTook bounds the took kept: past it, the oldest go, over or not.
const maxTook = 4096

// sweepEvery is how often the strays' entries are tried again.
const sweepEvery = time.Second

// add keeps the entry e of a's waiter, which gave up, until Redis takes it
// out of its queue.
func (s *strays) add(a *acquire, e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.m[e.id] = &stray{a: a, entry: e}
	if !s.running {
		a.c.logger().Warn(a.c.cfg.Kind+": a waiter gave up and Redis could not take it out of the lock's queue; the Locker releases what is handed to it, and retries every second",
			"lock", a.keys.name)
		s.running = true
		s.wg.Add(1)
		go s.sweep()
	}
}

// heard handles a grant message that reached no waiter of the Core: one for
// a stray is released at once. Others are for waiters that left already:
// with the lock, or after releasing every grant of theirs.
func (s *strays) heard(msg string) {
	m, ok := scripts.ParseMessage(msg)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if tk := s.taken[m.ID]; tk != nil {
		if v := m.Value(tk.a.owner); v != tk.value || tk.h.over() {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_ = tk.a.release(v)
			}()
		}
		return
	}
	st := s.m[m.ID]
	if st == nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if st.a.release(m.Value(st.a.owner)) == nil {
			s.forget(m.ID, st)
		}
	}()
}

// took records that a's waiter, whose entry is e, left with the lease h a
// grant message handed it (see took).
func (s *strays) took(a *acquire, e *entry, h *Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := time.Now()
	for len(s.tookIDs) > 0 {
		tk := s.taken[s.tookIDs[0]]
		if len(s.tookIDs) < maxTook && tk != nil && (!tk.h.over() || now.Sub(tk.at) <= tookFor(tk.a.ttl)) {
			break
		}
		delete(s.taken, s.tookIDs[0])
		s.tookIDs = s.tookIDs[1:]
	}
	s.taken[e.id] = &took{a: a, value: h.value, h: h, at: now}
	s.tookIDs = append(s.tookIDs, e.id)
}

// sweep takes the strays' entries out of their queues, and releases any
// grant they were handed, every sweepEvery until none is left or the Core
// is closed.
func (s *strays) sweep() {
	defer s.wg.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.done:
		case <-t.C:
		}
		s.mu.Lock()
		if s.closed || len(s.m) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		batch := make(map[string]*stray, len(s.m))
		for id, st := range s.m {
			batch[id] = st
		}
		s.mu.Unlock()
		for id, st := range batch {
			if st.a.releaseAny(st.entry) != nil {
				break // Redis still cannot be reached: until the next sweep
			}
			s.forget(id, st)
		}
	}
}

// forget drops the stray st, if it is still the one kept for id.
func (s *strays) forget(id string, st *stray) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[id] == st {
		delete(s.m, id)
	}
}

// close stops the sweeps and waits for the releases under way. A closed
// Core is no longer subscribed, so releases skip its entries.
func (s *strays) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	s.wg.Wait()
}
