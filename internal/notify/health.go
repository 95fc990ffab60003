package notify

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/port"
)

// The health check. A subscription connection can die without an error:
// half-open, after a NAT or load balancer dropped the flow, the server has
// forgotten the subscriptions (so every release skips the waiters on it),
// while the client's side stays open and silent until TCP keepalive, or
// forever behind a middlebox that answers it. So each receive loop reads
// with a deadline, and while its connection serves waiters or watchers, a
// silence of pingAfter sends a PING on it. A PING unanswered for pongWait
// has the server probed with a PING on the client's command connections
// (probe). A server that answers nobody either (CLIENT PAUSE ALL, a long
// script) is left alone: a new connection could not subscribe there before
// the old one's PING is answered, and closing the old one would have the
// releases held back by the pause skip its waiters. A server that answers
// the probe, while a read begun after that answer still hears nothing, has
// lost the connection: it is reopened, and its waiters are woken (reopen).
// So a dead connection that serves waiters is replaced 2.5 s (pingAfter +
// pongWait + 2 checkReads) and a probe's round trip after the last thing it
// heard, or up to idleRead later when its first waiter comes to it. One
// that serves nobody sends nothing: it only reads with a deadline of
// idleRead, to notice its first waiter.
const (
	idleRead  = time.Second
	checkRead = 250 * time.Millisecond // the read deadline while serving
	pingAfter = time.Second
	pongWait  = time.Second
	// probeWait bounds a probe's context: with go-redis's
	// ContextTimeoutEnabled the read, else its retries.
	probeWait = 2 * time.Second
)

// health is the health check of one connection, kept by its receive loop
// alone.
type health struct {
	serving bool        // the connection served waiters at the last check
	heard   time.Time   // when it last received anything
	pinged  time.Time   // when the PING not answered yet went out; zero: none
	probe   <-chan bool // the answer of the probe under way; nil: none
	// answered says the probe found the server answering: the next quiet
	// read, begun after that answer, finds the connection dead.
	answered bool
}

// step is what a quiet read leads the health check to do.
type step int

const (
	wait step = iota
	sendPing
	sendProbe
	replace
)

// deadline is how long the next read may wait for something.
func (h *health) deadline() time.Duration {
	if h.serving {
		return checkRead
	}
	return idleRead
}

// hear records that the connection received something: a message, a
// confirmation, a PONG or an error reply.
func (h *health) hear(now time.Time) {
	h.heard, h.pinged, h.probe, h.answered = now, time.Time{}, nil, false
}

// quiet is the next step after a read that heard nothing, at now, with the
// connection serving waiters or not.
func (h *health) quiet(now time.Time, serving bool) step {
	h.serving = serving
	switch {
	case !serving:
		h.pinged, h.probe, h.answered = time.Time{}, nil, false
	case h.pinged.IsZero():
		if now.Sub(h.heard) >= pingAfter {
			return sendPing
		}
	case h.answered:
		return replace
	case h.probe != nil:
		select {
		case ok := <-h.probe:
			h.probe, h.answered = nil, ok
			if !ok {
				h.pinged = now // the server answers nobody: wait on
			}
		default:
		}
	case now.Sub(h.pinged) >= pongWait:
		return sendProbe
	}
	return wait
}

// check runs the health check of cn after a read that heard nothing, and
// reports whether it reopened cn, or the error of a PING it could not send.
func (n *Notifier) check(cn *conn, h *health) (reopened bool, err error) {
	now := time.Now()
	channel, serving := n.serving(cn)
	switch h.quiet(now, serving) {
	case sendPing:
		if err := cn.ps.Ping(context.Background()); err != nil {
			return false, err
		}
		h.pinged = now
	case sendProbe:
		h.probe = n.probe(cn, channel)
	case replace:
		if n.reopen(cn) {
			return true, nil
		}
		h.pinged, h.answered = now, false // a Ring's shard is down: later
	}
	return false, nil
}

// serving returns a channel of cn that has waiters or watchers, if any.
func (n *Notifier) serving(cn *conn) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for channel, sub := range n.subs {
		if sub.conn == cn && len(sub.waiters) > 0 {
			return channel, true
		}
	}
	return "", false
}

// probe sends a PING, on the client's command connections, to the server
// that cn's channel is on, and reports on the channel returned whether the
// server answered it: with PONG, or with any error reply. Close waits for
// it, and cancels its context.
func (n *Notifier) probe(cn *conn, channel string) <-chan bool {
	answered := make(chan bool, 1)
	n.loops.Add(1) // from a receive loop, counted already
	go func() {
		defer n.loops.Done()
		ctx, cancel := context.WithTimeout(n.ctx, probeWait)
		defer cancel()
		answered <- answer(n.ping(ctx, cn, channel))
	}()
	return answered
}

// ping sends PING to the node or shard that serves cn's channel: a
// sharded one's slot master, a Ring's shard; any node of a cluster for its
// plain channels, which any node serves.
func (n *Notifier) ping(ctx context.Context, cn *conn, channel string) error {
	return n.sub.Ping(ctx, channel, cn.sharded)
}

// quietRead reports whether err is a read that heard nothing before its
// deadline; go-redis keeps the connection then (ReceiveTimeout).
func quietRead(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// answer reports whether a receive that returned err heard from the server:
// a message, a confirmation, a PONG, or an error reply.
func answer(err error) bool {
	var reply port.ServerError
	return err == nil || errors.As(err, &reply)
}

// refusedPing reports whether err is the refusal of the health check's PING
// by an ACL without it (an older least-privilege line): an answer all the
// same, and no refusal of a SUBSCRIBE.
func refusedPing(err error) bool {
	return strings.HasPrefix(err.Error(), "NOPERM") && strings.Contains(err.Error(), "'ping'")
}
