package faultproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
)

// quietFor is how long a test listens to be sure nothing was forwarded. A
// slow machine can only make such a check pass, never fail it wrongly.
const quietFor = 150 * time.Millisecond

// backend is the server side of the proxy: a listener whose connections the
// test accepts itself, so that it can play the server byte by byte.
type backend struct {
	ln net.Listener
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return &backend{ln: ln}
}

func newProxy(t *testing.T, b *backend) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(b.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// connect opens a connection through p and returns its client side and the
// server side the backend accepted for it.
func connect(t *testing.T, p *faultproxy.Proxy, b *backend) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	// The proxy dials the backend once it has accepted the client.
	if err := b.ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	server, err = b.ln.Accept()
	if err != nil {
		t.Fatalf("backend accept: %v", err)
	}
	t.Cleanup(func() { _ = server.Close() })
	return client, server
}

// rig starts a backend and a proxy to it, and opens one connection.
func rig(t *testing.T) (p *faultproxy.Proxy, b *backend, client, server net.Conn) {
	t.Helper()
	b = newBackend(t)
	p = newProxy(t, b)
	client, server = connect(t, p, b)
	return p, b, client, server
}

func send(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}

// expect reads exactly len(want) bytes from c within 5s.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q: got %q, %v", want, got, err)
	}
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// expectQuiet checks that nothing arrives on c for quietFor, and that c is
// still open.
func expectQuiet(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quietFor))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: got %q, %v, want nothing and a read timeout", what, buf[:n], err)
	}
}

// expectClosed checks that c reaches EOF (or a reset) without receiving any
// byte.
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if len(got) > 0 || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: got %q, %v, want the connection closed without data", what, got, err)
	}
}

func TestForwards(t *testing.T) {
	_, _, client, server := rig(t)
	send(t, client, "PING")
	expect(t, server, "PING")
	send(t, server, "+PONG")
	expect(t, client, "+PONG")
}

func TestDelay(t *testing.T) {
	p, _, client, server := rig(t)
	const d = 200 * time.Millisecond
	p.Delay(d)
	send(t, client, "request")
	expect(t, server, "request") // requests are not held
	sent := time.Now()
	send(t, server, "reply")
	expect(t, client, "reply")
	// A lower bound only: the reply cannot have come sooner than d.
	if took := time.Since(sent); took < d {
		t.Fatalf("got the reply after %v, want at least %v", took, d)
	}
	p.Delay(0)
	send(t, server, "prompt")
	expect(t, client, "prompt")
}

func TestFreezeThaw(t *testing.T) {
	p, _, client, server := rig(t)
	p.Freeze()
	p.Freeze() // idempotent
	send(t, client, "to-server")
	send(t, server, "to-client")
	expectQuiet(t, server, "request while frozen")
	expectQuiet(t, client, "reply while frozen")
	p.Thaw()
	expect(t, server, "to-server")
	expect(t, client, "to-client")
	p.Thaw() // idempotent
	send(t, client, "after")
	expect(t, server, "after")
}

func TestBlackhole(t *testing.T) {
	p, _, client, server := rig(t)
	p.Blackhole(true)
	send(t, client, "swallowed")
	expectQuiet(t, server, "request while blackholed")
	send(t, server, "reply")
	expect(t, client, "reply") // replies still flow
	p.Blackhole(false)
	send(t, client, "kept")
	expect(t, server, "kept") // not "swallowedkept": it is gone for good
}

func TestCutAll(t *testing.T) {
	b := newBackend(t)
	p := newProxy(t, b)
	c1, s1 := connect(t, p, b)
	c2, s2 := connect(t, p, b)
	p.CutAll()
	expectClosed(t, c1, "client 1")
	expectClosed(t, c2, "client 2")
	expectClosed(t, s1, "server 1")
	expectClosed(t, s2, "server 2")
	c3, s3 := connect(t, p, b)
	send(t, c3, "new")
	expect(t, s3, "new")
}

func TestCutAfterRequest(t *testing.T) {
	p, b, client, server := rig(t)
	matched := make(chan string, 4)
	p.CutAfterRequest(func(chunk []byte) bool {
		if !bytes.Contains(chunk, []byte("SET")) {
			return false
		}
		matched <- string(chunk)
		return true
	})
	send(t, client, "GET k")
	expect(t, server, "GET k")
	send(t, server, "$1 v")
	expect(t, client, "$1 v")

	send(t, client, "SET k v")
	expect(t, server, "SET k v") // the request reaches the server
	send(t, server, "+OK")
	expectClosed(t, client, "client after the cut request") // its reply does not come back
	expectClosed(t, server, "server after the cut request")
	if got := <-matched; got != "SET k v" {
		t.Fatalf("match saw %q, want %q", got, "SET k v")
	}

	// One shot: the next matching request goes through.
	client, server = connect(t, p, b)
	send(t, client, "SET k w")
	expect(t, server, "SET k w")
	send(t, server, "+OK")
	expect(t, client, "+OK")
	if len(matched) != 0 {
		t.Fatalf("match fired again on %q, want once", <-matched)
	}
}

func TestCutAfterRequestDisarm(t *testing.T) {
	p, _, client, server := rig(t)
	p.CutAfterRequest(func([]byte) bool { return true })
	p.CutAfterRequest(nil)
	send(t, client, "SET k v")
	expect(t, server, "SET k v")
	send(t, server, "+OK")
	expect(t, client, "+OK")
}

func TestCloseEndsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	b := newBackend(t)
	p, err := faultproxy.New(b.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// Leave goroutines in every waiting state: reading, frozen, delayed,
	// waiting for a cut request's reply.
	idleClient, _ := connect(t, p, b)
	frozenClient, _ := connect(t, p, b)
	cutClient, cutServer := connect(t, p, b)
	p.CutAfterRequest(func(chunk []byte) bool { return string(chunk) == "cut" })
	send(t, cutClient, "cut")
	expect(t, cutServer, "cut") // and never reply
	delayedClient, delayedServer := connect(t, p, b)
	p.Delay(time.Hour)
	send(t, delayedServer, "late")
	p.Freeze()
	send(t, frozenClient, "held")

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: got %v, want nil", err)
	}
	for _, c := range []net.Conn{idleClient, frozenClient, cutClient, delayedClient} {
		expectClosed(t, c, "client after Close")
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = c.Close()
		t.Fatal("dial after Close: got a connection, want an error")
	}
	// Close waited for the proxy's goroutines, which may still be taking
	// their last steps out (as leakcheck allows for, by waiting).
	_ = b.ln.Close()
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("got %d goroutines after Close, want at most %d as before New:\n%s", after, before, buf[:runtime.Stack(buf, true)])
	}
}

// subscribedRig is rig with a second connection, cmd, and the first made a
// subscription connection by sending it subscribe, a RESP command.
func subscribedRig(t *testing.T, subscribe string) (p *faultproxy.Proxy, b *backend, sub, subServer, cmd, cmdServer net.Conn) {
	t.Helper()
	p, b, sub, subServer = rig(t)
	cmd, cmdServer = connect(t, p, b)
	send(t, sub, subscribe)
	expect(t, subServer, subscribe)
	return p, b, sub, subServer, cmd, cmdServer
}

func TestHoldSubscriptions(t *testing.T) {
	p, _, sub, subServer, cmd, cmdServer := subscribedRig(t, "*2\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n")
	// A command that only mentions the word is no subscription.
	const eval = "*3\r\n$4\r\neval\r\n$21\r\n-- not a subscribe...\r\n$1\r\n0\r\n"
	send(t, cmd, eval)
	expect(t, cmdServer, eval)
	p.HoldSubscriptions()
	send(t, subServer, "message-1")
	send(t, cmdServer, "reply") // not a subscription connection: flows
	expect(t, cmd, "reply")
	expectQuiet(t, sub, "a message while held")
	send(t, subServer, "message-2")
	for p.Held() < 2 {
		time.Sleep(time.Millisecond)
	}
	if !p.ReleaseOne() {
		t.Fatal("ReleaseOne: got false, want a chunk released")
	}
	expect(t, sub, "message-1")
	expectQuiet(t, sub, "the second message before its release")
	p.ReleaseHeld()
	expect(t, sub, "message-2")
	send(t, subServer, "message-3") // no longer held
	expect(t, sub, "message-3")
	if p.ReleaseOne() {
		t.Fatal("ReleaseOne with nothing held: got true")
	}
}

func TestHalfOpenSubscriptions(t *testing.T) {
	const subscribe = "*2\r\n$10\r\nssubscribe\r\n$4\r\nchan\r\n"
	p, b, sub, subServer, cmd, cmdServer := subscribedRig(t, subscribe)
	p.HoldSubscriptions()
	send(t, subServer, "held") // dropped by the half-open below
	for p.Held() < 1 {
		time.Sleep(time.Millisecond)
	}
	p.HalfOpenSubscriptions()
	expectClosed(t, subServer, "the subscription's server side")
	if got := p.Held(); got != 0 {
		t.Fatalf("held chunks after the half-open: got %d, want 0", got)
	}
	p.ReleaseHeld()
	send(t, sub, "*1\r\n$4\r\nping\r\n") // read and dropped: the write succeeds
	expectQuiet(t, sub, "the half-open subscription's client side")
	// Not a subscription connection: it flows.
	send(t, cmd, "GET k")
	expect(t, cmdServer, "GET k")
	send(t, cmdServer, "$1 v")
	expect(t, cmd, "$1 v")
	// A connection that subscribes afterwards works as usual.
	later, laterServer := connect(t, p, b)
	send(t, later, subscribe)
	expect(t, laterServer, subscribe)
	send(t, laterServer, "message")
	expect(t, later, "message")
	// The half-open client side stays open until the client or the proxy
	// closes it.
	p.CutAll()
	expectClosed(t, sub, "the half-open client side after CutAll")
}
