package port

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file is what the adapters of clients with push hooks (rueidis,
// valkey-go) share: an argument's text, an error reply's type, and a
// Subscription over a dedicated connection whose client calls hooks as the
// server pushes.

// Text is the argument a as Redis reads it, as go-redis writes it. A
// BinaryMarshaler is marshalled once, for a client that writes a command
// once.
func Text(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case uint:
		return strconv.FormatUint(uint64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case nil:
		return ""
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10)
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return ""
		}
		return string(b)
	}
	return fmt.Sprint(a)
}

// Texts is Text of each of args.
func Texts(args []any) []string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = Text(a)
	}
	return s
}

// ReplyError is an error reply of the server's whose text is text, as an
// adapter returns one: a ServerError.
func ReplyError(text string) error { return replyError(text) }

type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// Redirected reports whether err is a cluster redirection or a slot not
// served for now.
func Redirected(err error) bool {
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

// Line is one dedicated connection of a client in push mode. Its commands
// wait for their answer; their errors follow the package's conventions
// (an error reply is a ServerError). Close ends the commands under way.
type Line interface {
	// Subscribe sends SUBSCRIBE, or SSUBSCRIBE when sharded.
	Subscribe(ctx context.Context, sharded bool, channels ...string) error
	// Unsubscribe sends UNSUBSCRIBE, or SUNSUBSCRIBE when sharded.
	Unsubscribe(ctx context.Context, sharded bool, channel string) error
	Ping(ctx context.Context) error
	Close()
}

// Hooks are what a Line's client calls as the server pushes: a message,
// and a (un)subscription's confirmation (kind "subscribe", "ssubscribe",
// "unsubscribe" or "sunsubscribe"). They must not block.
type Hooks struct {
	Message      func(channel, payload string)
	Subscription func(kind, channel string)
}

// Dial makes a Line whose client calls h, and the channel that its client
// sends an error on, or closes, once the connection dropped or was closed.
type Dial func(h Hooks) (Line, <-chan error)

// Hooked returns the Subscription over the Lines dial makes, sharded or
// not: dialled on its first Subscribe, and again, with its channels
// subscribed again, on the Receive after a classic one dropped.
func Hooked(dial Dial, sharded bool) Subscription {
	return &hooked{dial: dial, sharded: sharded, wake: make(chan struct{}, 1)}
}

type hooked struct {
	dial    Dial
	sharded bool
	wake    chan struct{} // a token when the queue grew, or on Close

	mu       sync.Mutex
	line     Line
	broken   <-chan error
	channels []string // subscribed (classic only), for a re-dial
	redial   bool     // a classic one dropped: dial on the next Receive
	closed   bool

	// qmu guards queue alone: the hooks take it on the client's reader,
	// which closing a Line may wait for, so it is held across no call of a
	// Line's.
	qmu   sync.Mutex
	queue []arrival

	// omu guards last, the end of the command sent last.
	omu  sync.Mutex
	last chan struct{}
}

// arrival is what the hooks or a command heard, for Receive.
type arrival struct {
	ev  Event
	err error
}

func (s *hooked) push(a arrival) {
	s.qmu.Lock()
	s.queue = append(s.queue, a)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// open dials a Line, with s.mu held.
func (s *hooked) open() {
	s.line, s.broken = s.dial(Hooks{
		Message: func(channel, payload string) {
			s.push(arrival{ev: Event{Kind: "message", Channel: channel, Payload: payload}})
		},
		Subscription: func(kind, channel string) {
			s.push(arrival{ev: Event{Kind: kind, Channel: channel}})
		},
	})
}

// current returns the Line, dialling one if there is none, or nil once s
// is closed.
func (s *hooked) current() Line {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.line == nil {
		s.open()
	}
	return s.line
}

// send runs cmd in the background, as go-redis writes a SUBSCRIBE and lets
// Receive hear its answer: an error reply comes to Receive, and so does a
// dropped connection (through the hooks' end). The commands run one at a
// time, in the order they were sent, as go-redis writes them on its one
// connection: an UNSUBSCRIBE overtaken by the SUBSCRIBE after it would
// leave the channel unsubscribed. A Line's command needs no deadline: it
// ends with the Line, which Close ends.
func (s *hooked) send(cmd func(context.Context) error, pong bool) {
	done := make(chan struct{})
	s.omu.Lock()
	prev := s.last
	s.last = done
	s.omu.Unlock()
	go func() {
		if prev != nil {
			<-prev
		}
		err := cmd(context.Background())
		close(done)
		var reply ServerError
		switch {
		case err == nil && pong:
			s.push(arrival{ev: Event{Kind: "pong"}})
		case err != nil && errors.As(err, &reply):
			s.push(arrival{err: err})
		}
	}()
}

func (s *hooked) Subscribe(_ context.Context, channels ...string) error {
	l := s.current()
	if l == nil {
		return ErrClosed
	}
	if !s.sharded {
		s.mu.Lock()
		for _, ch := range channels {
			if !slices.Contains(s.channels, ch) {
				s.channels = append(s.channels, ch)
			}
		}
		s.mu.Unlock()
	}
	s.send(func(ctx context.Context) error { return l.Subscribe(ctx, s.sharded, channels...) }, false)
	return nil
}

func (s *hooked) Unsubscribe(_ context.Context, channel string) error {
	l := s.current()
	if l == nil {
		return ErrClosed
	}
	if !s.sharded {
		s.mu.Lock()
		s.channels = slices.DeleteFunc(s.channels, func(ch string) bool { return ch == channel })
		s.mu.Unlock()
	}
	s.send(func(ctx context.Context) error { return l.Unsubscribe(ctx, s.sharded, channel) }, false)
	return nil
}

func (s *hooked) Ping(context.Context) error {
	l := s.current()
	if l == nil {
		return ErrClosed
	}
	s.send(l.Ping, true)
	return nil
}

func (s *hooked) Receive(ctx context.Context, timeout time.Duration) (Event, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return Event{}, ErrClosed
		}
		if s.redial {
			s.redial = false
			s.open()
			if channels := slices.Clone(s.channels); len(channels) > 0 {
				l := s.line
				s.send(func(ctx context.Context) error { return l.Subscribe(ctx, false, channels...) }, false)
			}
		}
		broken := s.broken
		s.mu.Unlock()
		s.qmu.Lock()
		if len(s.queue) > 0 {
			a := s.queue[0]
			s.queue = s.queue[1:]
			s.qmu.Unlock()
			return a.ev, a.err
		}
		s.qmu.Unlock()
		select {
		case <-s.wake:
		case err, ok := <-broken:
			if s.drop(broken) {
				if !ok || err == nil {
					err = errDropped
				}
				return Event{}, err
			}
		case <-timer.C:
			return Event{}, os.ErrDeadlineExceeded
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// errDropped is Receive's error for a connection that dropped without one.
var errDropped = fmt.Errorf("leasekit: the subscription connection dropped")

// drop retires the Line whose hooks ended with broken, unless s was closed
// or has another one already, and reports whether it did. A sharded one is
// reopened by the engine, on its slot's master of the moment; a classic one
// is dialled again by the next Receive.
func (s *hooked) drop(broken <-chan error) bool {
	s.mu.Lock()
	if s.closed || s.broken != broken {
		s.mu.Unlock()
		return false
	}
	l := s.line
	s.line, s.broken, s.redial = nil, nil, !s.sharded
	s.mu.Unlock()
	l.Close()
	return true
}

func (s *hooked) Close() error {
	s.mu.Lock()
	l := s.line
	s.closed, s.line, s.broken = true, nil, nil
	s.mu.Unlock()
	if l != nil {
		l.Close()
	}
	select { // a Receive waiting wakes, and finds s closed
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}
