package lease

import (
	"sync"
	"time"
)

// strays are the queue entries of a Core's waiters that gave up while Redis
// could not take their entries out of the queue (it was slow or down, or the
// process was starved): while the Core is subscribed, a release may still
// hand such an entry the lock. The Core releases such a grant the moment it
// hears of it, and takes the entries out of their queues once Redis answers,
// so a stray costs the lock a round trip, never a ttl. (A release skips an
// entry whose waiter's patience has run out without asking: handoff.go.)
type strays struct {
	c       *Core
	mu      sync.Mutex
	m       map[string]*stray // by the entry's id
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
	m, ok := parseMessage(msg)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[m.id]
	if st == nil || s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if st.a.tryRelease(m.value(st.a.owner), nil) == nil {
			s.forget(m.id, st)
		}
	}()
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
			if st.a.tryReleaseAny(st.entry) != nil {
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
