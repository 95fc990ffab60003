package port_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/port"
)

// orderLine is a Line that records the commands it is sent, and holds each
// UNSUBSCRIBE until release is closed.
type orderLine struct {
	mu      sync.Mutex
	sent    []string
	entered chan string
	release chan struct{}
}

func (l *orderLine) record(cmd string) {
	l.mu.Lock()
	l.sent = append(l.sent, cmd)
	l.mu.Unlock()
	l.entered <- cmd
}

func (l *orderLine) Subscribe(_ context.Context, _ bool, channels ...string) error {
	l.record("subscribe " + channels[0])
	return nil
}

func (l *orderLine) Unsubscribe(_ context.Context, _ bool, channel string) error {
	l.record("unsubscribe " + channel)
	<-l.release
	return nil
}

func (l *orderLine) Ping(context.Context) error { l.record("ping"); return nil }
func (l *orderLine) Close()                     {}

// TestHookedSendsInOrder: a SUBSCRIBE sent after an UNSUBSCRIBE of the same
// channel reaches the Line after it, as go-redis writes both on its one
// connection; overtaken, the UNSUBSCRIBE would leave the channel
// unsubscribed while the engine counts it subscribed.
func TestHookedSendsInOrder(t *testing.T) {
	l := &orderLine{entered: make(chan string, 8), release: make(chan struct{})}
	s := port.Hooked(func(port.Hooks) (port.Line, <-chan error) { return l, make(chan error) }, false)
	defer s.Close()
	ctx := context.Background()
	if err := s.Subscribe(ctx, "ch"); err != nil {
		t.Fatal(err)
	}
	if got := <-l.entered; got != "subscribe ch" {
		t.Fatalf("first command %q, want subscribe ch", got)
	}
	if err := s.Unsubscribe(ctx, "ch"); err != nil {
		t.Fatal(err)
	}
	if err := s.Subscribe(ctx, "ch"); err != nil {
		t.Fatal(err)
	}
	if got := <-l.entered; got != "unsubscribe ch" {
		t.Fatalf("second command %q, want unsubscribe ch", got)
	}
	// The UNSUBSCRIBE is under way: the SUBSCRIBE must wait for it.
	select {
	case got := <-l.entered:
		t.Fatalf("%q reached the Line while the UNSUBSCRIBE before it was under way", got)
	case <-time.After(50 * time.Millisecond):
	}
	close(l.release)
	if got := <-l.entered; got != "subscribe ch" {
		t.Fatalf("third command %q, want subscribe ch", got)
	}
}
