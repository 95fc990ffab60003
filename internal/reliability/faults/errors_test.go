package faults_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// TestTryWithEndedContext: a single try whose context has ended matches both
// ErrNotObtained and ctx.Err(), as a wait does.
func TestTryWithEndedContext(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := redistest.Mini(t)
			l := k.open(t, b.Client, lockConfig{})
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := l.try(ctx, "ended", time.Minute)
			if !errors.Is(err, k.notObtained) || !errors.Is(err, context.Canceled) {
				t.Errorf("try: got %v, want ErrNotObtained and context.Canceled", err)
			}
			_, err = l.obtain(ctx, "ended", time.Minute)
			if !errors.Is(err, k.notObtained) || !errors.Is(err, context.Canceled) {
				t.Errorf("obtain: got %v, want ErrNotObtained and context.Canceled", err)
			}
		})
	}
}

// TestLostLeaseSaysWhatWasSeen: a lease lost while fn runs, or found gone
// when it returns, is reported as what was seen (another owner holds the
// lock, or the key is gone), on one line even when fn returns its context's
// error; and a lock that fn released itself is no loss.
func TestLostLeaseSaysWhatWasSeen(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				l := k.open(t, b.Client, lockConfig{})
				cases := []struct {
					name, want string
					take       func(key string)
				}{
					{"taken", "another owner holds it", func(key string) { b.Client.Set(ctx, key, "thief", time.Minute) }},
					{"deleted", "the key is gone", func(key string) { b.Client.Del(ctx, key) }},
				}
				for _, tc := range cases {
					// A ttl whose refreshes (every ttl/3) a loaded machine
					// cannot starve past the deadline: the loss must be
					// seen by a refresh, which says what it found.
					err := l.do(ctx, tc.name, 1500*time.Millisecond, func(ctx context.Context) error {
						tc.take(lockKey(tc.name))
						<-ctx.Done()
						return ctx.Err()
					})
					if !errors.Is(err, k.lockLost) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
						t.Errorf("%s while fn ran: got %q, want one line matching ErrLockLost that says %q", tc.name, err, tc.want)
					}
					held, err := l.try(ctx, tc.name+"-at-return", time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					err = held.hold(ctx, func(context.Context) error { tc.take(lockKey(tc.name + "-at-return")); return nil })
					if !errors.Is(err, k.lockLost) || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("%s before fn returned: got %v, want ErrLockLost saying %q", tc.name, err, tc.want)
					}
				}
				held, err := l.try(ctx, "released-by-fn", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if err := held.hold(ctx, held.release); err != nil {
					t.Errorf("Hold whose fn released the lock: got %v, want nil", err)
				}
			})
		})
	}
}

// records keeps the messages a logger was given.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

// TestRefusedConnection: an acquire whose connection is refused sent nothing,
// so it has no grant to release: it says the connection was refused, in the
// package's own words, and logs no failed release.
func TestRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = c.Close() })
			logged := &records{}
			l := k.open(t, c, lockConfig{log: slog.New(logged)})
			for op, call := range map[string]func() error{
				"try":    func() error { _, err := l.try(t.Context(), "refused", time.Minute); return err },
				"obtain": func() error { _, err := l.obtain(t.Context(), "refused", time.Minute); return err },
			} {
				err := call()
				if err == nil || !strings.HasPrefix(err.Error(), k.name+": ") || !strings.Contains(err.Error(), "connection refused") {
					t.Errorf("%s: got %v, want an error of package %s saying the connection was refused", op, err, k.name)
				}
			}
			logged.mu.Lock()
			defer logged.mu.Unlock()
			for _, m := range logged.msgs {
				if strings.Contains(m, "release") {
					t.Errorf("logged %q: nothing was sent, so nothing was granted to release", m)
				}
			}
		})
	}
}

// TestErrorsHaveOnePrefix: every error of a package starts with its name, and
// names the lock as the caller did, never by its Redis key alone.
func TestErrorsHaveOnePrefix(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := redistest.Mini(t)
			ctx := t.Context()
			l := k.open(t, b.Client, lockConfig{})
			other := k.open(t, b.Client, lockConfig{})
			held, err := l.try(ctx, "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			_, notObtained := other.try(ctx, "job", time.Minute)
			b.Client.Set(ctx, lockKey("job"), "thief", time.Minute)
			notHeld := held.release(ctx)
			b.Client.LPush(ctx, lockKey("list"), "x")
			_, wrongType := l.try(ctx, "list", time.Minute)
			_ = l.close()
			_, closed := l.try(ctx, "job", time.Minute)
			for what, err := range map[string]error{"not obtained": notObtained, "not held": notHeld, "wrong type": wrongType, "closed": closed} {
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				if !strings.HasPrefix(msg, k.name+": ") || strings.Count(msg, k.name+":") > 2 || !strings.Contains(msg, `lock "`) {
					t.Errorf("%s: got %q, want it to start %q and name the lock", what, msg, k.name+": ")
				}
				if what == "wrong type" && (!strings.Contains(msg, `key "`+lockKey("list")+`": `) || !strings.Contains(msg, "WRONGTYPE")) {
					t.Errorf("%s: got %q, want it to name the key %q and say WRONGTYPE", what, msg, lockKey("list"))
				}
			}
		})
	}
}
