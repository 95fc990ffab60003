package faults_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// writeToNilMap panics as a careless fn does: a runtime error.
func writeToNilMap(context.Context) error {
	var m map[string]int
	//lint:ignore SA5000 the panic is the point: fn's bug, as in the repro
	m["rebuild"]++
	return nil
}

// catch runs call and returns what it panicked with, or nil.
func catch(call func()) (recovered any) {
	defer func() { recovered = recover() }()
	call()
	return nil
}

// TestPanicInFnEndsTheHold: a panic in the function of Do, Hold or Once stops
// the refreshes and ends the hold, as a return would (Do and Hold release the
// lock; Once keeps it only to the end of its period), and goes on up the stack
// unchanged. Do runs under an httptest server, as a handler would: net/http
// recovers the panic, and the process lives on, as the lock must not.
func TestPanicInFnEndsTheHold(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				l := k.open(t, b.Client, lockConfig{})
				gone := func(name string) {
					t.Helper()
					if n := b.Client.Exists(ctx, lockKey(name)).Val(); n != 0 {
						t.Fatalf("%s: the lock is still held after fn panicked: refreshing went on", name)
					}
				}

				served := make(chan error, 1)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_ = l.do(r.Context(), "rebuild", 900*time.Millisecond, writeToNilMap)
					served <- errors.New("Do returned: the panic was swallowed")
				}))
				defer srv.Close()
				srv.Config.ErrorLog = nil
				if resp, err := http.Get(srv.URL); err == nil {
					resp.Body.Close()
					t.Fatalf("GET: got %s, want the connection dropped by the handler's panic", resp.Status)
				}
				select {
				case err := <-served:
					t.Fatal(err)
				default:
				}
				gone("rebuild")

				held, err := l.try(ctx, "held", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				r := catch(func() { _ = held.hold(ctx, writeToNilMap) })
				if re, ok := r.(runtime.Error); !ok || !strings.Contains(re.Error(), "nil map") {
					t.Fatalf("Hold: recovered %v, want the runtime error of the nil map, unchanged", r)
				}
				gone("held")

				if l.once == nil {
					return
				}
				const period = 300 * time.Millisecond
				r = catch(func() { _, _ = l.once(ctx, "tick", period, writeToNilMap) })
				if re, ok := r.(runtime.Error); !ok || !strings.Contains(re.Error(), "nil map") {
					t.Fatalf("Once: recovered %v, want the runtime error of the nil map, unchanged", r)
				}
				if ttl := b.Client.PTTL(ctx, lockKey("tick")).Val(); ttl <= 0 || ttl > period {
					t.Fatalf("Once after a panic: the lock's ttl is %v, want it kept to the period's end (at most %v)", ttl, period)
				}
				b.Pass(period + 50*time.Millisecond)
				gone("tick")
			})
		})
	}
}

// TestNilFuncIsRefused: Do, Hold and Once given a nil function return an
// error and acquire nothing (Hold leaves the lock held).
func TestNilFuncIsRefused(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := redistest.Mini(t)
			ctx := t.Context()
			l := k.open(t, b.Client, lockConfig{})
			if err := l.do(ctx, "nil-do", time.Minute, nil); err == nil || !strings.Contains(err.Error(), "fn is nil") {
				t.Errorf("Do(nil): got %v, want an error saying fn is nil", err)
			}
			if b.Client.Exists(ctx, lockKey("nil-do")).Val() != 0 {
				t.Errorf("Do(nil) acquired the lock")
			}
			held, err := l.try(ctx, "nil-hold", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := held.hold(ctx, nil); err == nil || !strings.Contains(err.Error(), "fn is nil") {
				t.Errorf("Hold(nil): got %v, want an error saying fn is nil", err)
			}
			if err := held.release(ctx); err != nil {
				t.Errorf("Release after Hold(nil): got %v, want the lock still held", err)
			}
			if l.once == nil {
				return
			}
			if ran, err := l.once(ctx, "nil-once", time.Minute, nil); ran || err == nil {
				t.Errorf("Once(nil): got %v, %v, want false and an error", ran, err)
			}
			if b.Client.Exists(ctx, lockKey("nil-once")).Val() != 0 {
				t.Errorf("Once(nil) acquired the lock")
			}
		})
	}
}
