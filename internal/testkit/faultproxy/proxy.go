// Package faultproxy is a TCP proxy for tests that puts network faults between
// a client and a server on loopback: late replies, frozen traffic, swallowed
// requests, cut connections, and the ambiguous reply (a request that reached
// the server and was executed, but whose reply never reached the client).
//
// The controls apply at once to every connection, open or yet to come, but
// for CutAll and HalfOpenSubscriptions, which act once on the connections
// open at the time. The proxy works in chunks: a chunk is what one read from
// a socket returned. It parses nothing. That is good enough for RESP between
// go-redis and redis-server on loopback, where a command, or a pipeline of
// commands, is written at once and arrives in one read; a large request can
// still arrive in several chunks, and one chunk can hold several pipelined
// commands.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the most one read takes from a socket.
const chunkSize = 64 << 10

// Proxy forwards TCP connections from a loopback port to a target address,
// with faults switched on and off by its methods. Its methods are safe for
// concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	dial   context.Context // cancelled by Close: ends dials in progress
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	links     map[*link]struct{}
	delay     time.Duration
	thaw      chan struct{} // non-nil while frozen; closed by Thaw
	blackhole bool
	cut       *cutRule
	holding   bool // HoldSubscriptions is on
}

// link is one proxied connection: the client's side and the server's side.
// It is tracked from the moment the client connects, so that CutAll and
// Close reach a connection whose server side is still being dialled.
type link struct {
	client net.Conn
	server net.Conn      // set once by connect; fixed before the forwarding starts
	done   chan struct{} // closed by close
	once   sync.Once

	mu      sync.Mutex
	closed  bool
	replied chan struct{} // non-nil after a cut request went out; closed when its reply arrives

	// subscriber is set once the client has sent a SUBSCRIBE or SSUBSCRIBE.
	subscriber atomic.Bool
	// halfOpen is set, before the server side is closed, by
	// HalfOpenSubscriptions: from then on the client's chunks are dropped
	// and the client side stays open until the client or the proxy closes it.
	halfOpen atomic.Bool
	// held are the server's chunks kept back by HoldSubscriptions, oldest
	// first; writes to the client happen under writeMu, so that they keep
	// their order whoever sends them.
	writeMu sync.Mutex
	held    [][]byte
}

// cutRule is one armed CutAfterRequest.
type cutRule struct {
	match func([]byte) bool
}

// New returns a proxy to target that listens on 127.0.0.1 on a free port.
// Close it to end every connection and goroutine it started.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, dial: ctx, stop: stop, links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address clients connect to, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening, closes every connection and waits until every
// goroutine of the proxy has ended. Data held by Freeze or Delay is dropped.
// A match function given to CutAfterRequest that is still running delays
// Close until it returns. Close is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := p.snapshot()
	p.mu.Unlock()
	p.stop()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

// Delay holds every chunk the server sends until d after the proxy read it,
// as a slow or congested network would; 0 turns it off. A chunk waits for
// the chunks read before it on its connection, so delays do not overlap
// within a connection (go-redis has one request in flight per connection).
// Requests are not delayed.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = max(d, 0)
	p.mu.Unlock()
}

// Freeze holds all traffic in both directions, on every connection, without
// closing anything: what was sent waits in the proxy and in the sockets'
// buffers (a sender that fills them blocks, as on a stalled network) until
// Thaw. Freezing a frozen proxy changes nothing.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	if p.thaw == nil {
		p.thaw = make(chan struct{})
	}
	p.mu.Unlock()
}

// Thaw lets the traffic held by Freeze go on, in order. Thawing a proxy that
// is not frozen changes nothing.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	if p.thaw != nil {
		close(p.thaw)
		p.thaw = nil
	}
	p.mu.Unlock()
}

// Blackhole, while on, silently drops every chunk a client sends: the
// connection stays open and the server never hears the request, so the
// client waits for a reply that does not come. Replies still flow.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	p.mu.Unlock()
}

// CutAll closes every open connection, both sides, at once. Connections made
// afterwards work as usual.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// CutAfterRequest arms a one-shot ambiguous-reply fault: the next chunk a
// client sends for which match returns true is forwarded to the server as
// usual, and once the server's reply to it arrives at the proxy, that reply is
// dropped and the connection is closed (both sides). The server has executed
// the request; the client sees its connection break before any reply: the
// case a client cannot tell from a request that never arrived. (Until that
// reply comes, the connection stays open, as with any slow server.)
//
// match sees every chunk sent while the fault is armed (not those dropped by
// Blackhole), from every connection, on the goroutine that forwards it: it
// must be safe for concurrent use, must not keep the slice, and should return
// quickly (the connection waits for it). Calling CutAfterRequest again
// replaces an armed fault that has not fired; nil disarms it.
func (p *Proxy) CutAfterRequest(match func([]byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if match == nil {
		p.cut = nil
		return
	}
	p.cut = &cutRule{match: match}
}

// HalfOpenSubscriptions half-opens every subscription connection open now
// (one whose client has sent SUBSCRIBE or SSUBSCRIBE), as a NAT or load
// balancer does when it drops a flow: the server side is closed, so the
// server forgets the subscriptions (PUBSUB NUMSUB counts them no more),
// while the client side stays open and silent. What the client sends there
// is read and dropped, nothing is written back (what HoldSubscriptions kept
// back is dropped too), and the client's TCP stack sees every segment
// acknowledged, so neither a write nor a keepalive ever fails. It lasts
// until the client or the proxy closes the connection. Connections that
// subscribe afterwards work as usual.
func (p *Proxy) HalfOpenSubscriptions() {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	for _, l := range links {
		if !l.subscriber.Load() {
			continue
		}
		l.writeMu.Lock()
		l.held = nil
		l.halfOpen.Store(true)
		l.writeMu.Unlock()
		l.mu.Lock()
		server := l.server
		l.mu.Unlock()
		if server != nil {
			_ = server.Close()
		}
	}
}

// HoldSubscriptions keeps back what the server sends on every subscription
// connection (one whose client has sent SUBSCRIBE or SSUBSCRIBE), from now on:
// the messages a publish delivers wait in the proxy, in order, until
// ReleaseOne or ReleaseHeld. Other connections flow as usual.
func (p *Proxy) HoldSubscriptions() {
	p.mu.Lock()
	p.holding = true
	p.mu.Unlock()
}

// Held reports how many chunks HoldSubscriptions keeps back now.
func (p *Proxy) Held() int {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	n := 0
	for _, l := range links {
		l.writeMu.Lock()
		n += len(l.held)
		l.writeMu.Unlock()
	}
	return n
}

// ReleaseOne delivers the oldest chunk kept back on any one connection (with
// a single subscription connection: the oldest message), and reports whether
// there was one. Holding goes on.
func (p *Proxy) ReleaseOne() bool {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	for _, l := range links {
		l.writeMu.Lock()
		if len(l.held) > 0 {
			chunk := l.held[0]
			l.held = l.held[1:]
			_, _ = l.client.Write(chunk)
			l.writeMu.Unlock()
			return true
		}
		l.writeMu.Unlock()
	}
	return false
}

// ReleaseHeld stops HoldSubscriptions and delivers everything kept back, in
// order.
func (p *Proxy) ReleaseHeld() {
	p.mu.Lock()
	p.holding = false
	links := p.snapshot()
	p.mu.Unlock()
	for _, l := range links {
		l.writeMu.Lock()
		for _, chunk := range l.held {
			_, _ = l.client.Write(chunk)
		}
		l.held = nil
		l.writeMu.Unlock()
	}
}

// isSubscribe reports whether a client's chunk starts with a SUBSCRIBE or
// SSUBSCRIBE command (RESP: "*<n>\r\n$<len>\r\n<name>\r\n").
func isSubscribe(chunk []byte) bool {
	f := bytes.SplitN(chunk, []byte("\r\n"), 3)
	if len(f) < 3 || !bytes.HasPrefix(f[0], []byte("*")) {
		return false
	}
	name, _, _ := bytes.Cut(f[2], []byte("\r\n"))
	name = bytes.ToLower(name)
	return bytes.Equal(name, []byte("subscribe")) || bytes.Equal(name, []byte("ssubscribe"))
}

// snapshot lists the open links. The caller holds p.mu.
func (p *Proxy) snapshot() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // say, out of file descriptors: keep serving
			continue
		}
		p.wg.Add(1)
		go p.open(c)
	}
}

// open dials the target for a new client connection and starts forwarding.
func (p *Proxy) open(client net.Conn) {
	defer p.wg.Done()
	l := &link{client: client, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = client.Close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	var d net.Dialer
	server, err := d.DialContext(p.dial, "tcp", p.target)
	if err != nil {
		p.forget(l)
		return
	}
	if !l.connect(server) { // cut while dialling
		_ = server.Close()
		p.forget(l)
		return
	}
	// open still counts in p.wg, so Close cannot be waiting on zero.
	p.wg.Add(2)
	go p.forwardRequests(l)
	go p.forwardReplies(l)
}

// connect sets the server side of l, unless l was closed meanwhile.
func (l *link) connect(server net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.server = server
	return true
}

func (l *link) close() {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		server := l.server
		l.mu.Unlock()
		_ = l.client.Close()
		if server != nil {
			_ = server.Close()
		}
		close(l.done)
	})
}

// forget closes l and stops tracking it.
func (p *Proxy) forget(l *link) {
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// forwardRequests copies client chunks to the server until either side ends.
func (p *Proxy) forwardRequests(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	buf := make([]byte, chunkSize)
	for {
		n, err := l.client.Read(buf)
		if n > 0 && !p.forwardRequest(l, buf[:n]) {
			return
		}
		if err != nil {
			return
		}
	}
}

// forwardRequest sends one client chunk on, or not, as the faults say. It
// returns false when the link is done.
func (p *Proxy) forwardRequest(l *link, chunk []byte) bool {
	if !p.waitThaw(l) {
		return false
	}
	p.mu.Lock()
	drop, rule := p.blackhole, p.cut
	p.mu.Unlock()
	if drop || l.halfOpen.Load() {
		return true
	}
	if !l.subscriber.Load() && isSubscribe(chunk) {
		l.subscriber.Store(true)
	}
	if rule != nil && rule.match(chunk) && p.disarm(rule) {
		p.cutAfter(l, chunk)
		return false
	}
	_, err := l.server.Write(chunk)
	// A write that lost the race with HalfOpenSubscriptions is dropped.
	return err == nil || l.halfOpen.Load()
}

// disarm takes rule off the proxy, reporting whether this caller did (two
// connections can match at once; the fault fires once).
func (p *Proxy) disarm(rule *cutRule) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut != rule {
		return false
	}
	p.cut = nil
	return true
}

// cutAfter forwards chunk, waits for the server's reply to reach the proxy
// (forwardReplies drops it), and closes the link.
func (p *Proxy) cutAfter(l *link, chunk []byte) {
	replied := make(chan struct{})
	l.mu.Lock()
	l.replied = replied
	l.mu.Unlock()
	if _, err := l.server.Write(chunk); err == nil {
		select {
		case <-replied:
		case <-l.done:
		}
	}
	l.close()
}

// forwardReplies copies server chunks to the client until either side ends;
// a half-open link's client side is left to forwardRequests.
func (p *Proxy) forwardReplies(l *link) {
	defer p.wg.Done()
	defer func() {
		if !l.halfOpen.Load() {
			p.forget(l)
		}
	}()
	buf := make([]byte, chunkSize)
	for {
		n, err := l.server.Read(buf)
		read := time.Now()
		if n > 0 && !l.halfOpen.Load() {
			if l.cutReplied() {
				return
			}
			if !p.waitThaw(l) || !p.waitDelay(l, read) {
				return
			}
			if err := p.deliver(l, buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// deliver writes a server chunk to the client, or keeps it back while
// HoldSubscriptions holds l's traffic. A chunk never overtakes one kept back.
func (p *Proxy) deliver(l *link, chunk []byte) error {
	p.mu.Lock()
	holding := p.holding
	p.mu.Unlock()
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.halfOpen.Load() {
		return nil
	}
	if holding && l.subscriber.Load() {
		l.held = append(l.held, bytes.Clone(chunk))

		return nil
	}
	for _, held := range l.held {
		if _, err := l.client.Write(held); err != nil {
			return err
		}
	}
	l.held = nil
	_, err := l.client.Write(chunk)
	return err
}

// cutReplied reports whether a cut request went out on l, and if so tells
// its cutter that the reply has arrived. No chunk read after the request went
// out can be an earlier reply: a go-redis connection has one request in flight.
func (l *link) cutReplied() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.replied == nil {
		return false
	}
	close(l.replied)
	l.replied = nil
	return true
}

// waitThaw blocks while the proxy is frozen. It returns false when the link
// is done first.
func (p *Proxy) waitThaw(l *link) bool {
	for {
		p.mu.Lock()
		thaw := p.thaw
		p.mu.Unlock()
		if thaw == nil {
			return true
		}
		select {
		case <-thaw:
		case <-l.done:
			return false
		}
	}
}

// waitDelay blocks until the current delay has passed since read. It returns
// false when the link is done first.
func (p *Proxy) waitDelay(l *link, read time.Time) bool {
	p.mu.Lock()
	d := p.delay
	p.mu.Unlock()
	left := time.Until(read.Add(d))
	if left <= 0 {
		return true
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}
