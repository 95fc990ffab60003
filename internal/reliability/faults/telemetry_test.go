package faults_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// rig is an OpenTelemetry SDK that keeps what it is given: a ManualReader
// for metrics, a SpanRecorder for spans.
type rig struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	cfg    lockConfig
}

func newRig(t *testing.T) *rig {
	r := &rig{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	r.cfg = lockConfig{meters: mp, tracer: tp}
	return r
}

// awaitValue reads the metric until it is want, for up to ten seconds (a
// bound for a hung test, not a timing assertion), and returns the last value.
func (r *rig) awaitValue(t *testing.T, want int64, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	got := r.value(t, name, attrs...)
	for deadline := time.Now().Add(10 * time.Second); got != want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		got = r.value(t, name, attrs...)
	}
	return got
}

// value is the sum of the metric called name over the data points whose
// attributes include want: a counter's total, an up-down counter's value, a
// histogram's count of measurements.
func (r *rig) value(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	has := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/leasekit/leasekit" {
			t.Errorf("instrumentation scope: got %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						total += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						total += int64(p.Count)
					}
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return total
}

// ended are the spans called name that have ended.
func (r *rig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// noOwnerIDs fails the test if any recorded span attribute or event carries
// an owner id.
func (r *rig) noOwnerIDs(t *testing.T, owners ...string) {
	t.Helper()
	for _, s := range r.spans.Ended() {
		var text []string
		for _, kv := range s.Attributes() {
			text = append(text, kv.Value.String())
		}
		for _, e := range s.Events() {
			text = append(text, e.Name)
			for _, kv := range e.Attributes {
				text = append(text, kv.Value.String())
			}
		}
		for _, owner := range owners {
			if owner != "" && strings.Contains(strings.Join(text, " "), owner) {
				t.Errorf("span %s carries an owner id", s.Name())
			}
		}
	}
}

var (
	kindKey    = attribute.Key("leasekit.lock.kind")
	outcomeKey = attribute.Key("leasekit.lock.outcome")
	waitedKey  = attribute.Key("leasekit.lock.waited")
	reasonKey  = attribute.Key("leasekit.lock.lost.reason")
)

// TestTelemetryOfAContendedDo: two Do calls on one lock, the second waiting
// for the first. Every metric and span of a wait and a handoff is recorded,
// and back to zero (the gauges) when both are done.
func TestTelemetryOfAContendedDo(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				r := newRig(t)
				l := k.open(t, b.Client, r.cfg)
				count := redistest.Count(b.Client)
				holding, release := make(chan struct{}), make(chan struct{})
				first := make(chan error, 1)
				var owner string
				go func() {
					first <- l.do(ctx, "job", time.Minute, func(context.Context) error {
						owner = b.Client.Get(ctx, lockKey("job")).Val()
						close(holding)
						<-release
						return nil
					})
				}()
				<-holding
				second := make(chan error, 1)
				go func() { second <- l.do(ctx, "job", time.Minute, func(context.Context) error { return nil }) }()
				count.Await(t, "wait", 1) // queued
				// The server has run the wait script; the waiter counts
				// itself once it has read the reply, and then waits for the
				// release, which has not come yet.
				if got := r.awaitValue(t, 1, "leasekit.lock.waiters", kindKey.String(k.name)); got != 1 {
					t.Errorf("waiters while one waits: got %d, want 1", got)
				}
				if got := r.value(t, "leasekit.lock.held"); got != 1 {
					t.Errorf("held while one holds: got %d, want 1", got)
				}
				close(release)
				if err := errors.Join(<-first, <-second); err != nil {
					t.Fatal(err)
				}
				for name, want := range map[string]int64{
					"leasekit.lock.waiters": 0, "leasekit.lock.held": 0, "leasekit.lock.handoffs": 1,
					"leasekit.lock.lost": 0, "leasekit.lock.refresh.failures": 0,
				} {
					if got := r.value(t, name); got != want {
						t.Errorf("%s: got %d, want %d", name, got, want)
					}
				}
				obtained := outcomeKey.String("obtained")
				if got := r.value(t, "leasekit.lock.acquire.duration", obtained, waitedKey.Bool(false)); got != 1 {
					t.Errorf("acquires obtained at once: got %d, want 1", got)
				}
				if got := r.value(t, "leasekit.lock.acquire.duration", obtained, waitedKey.Bool(true)); got != 1 {
					t.Errorf("acquires obtained after waiting: got %d, want 1", got)
				}
				if got := r.value(t, "leasekit.lock.hold.duration", outcomeKey.String("released")); got != 2 {
					t.Errorf("holds released: got %d, want 2", got)
				}
				waits := r.ended(k.name + "." + map[string]string{"efficiency": "Obtain", "correctness": "Acquire"}[k.name])
				dos := r.ended(k.name + ".Do")
				if len(waits) != 2 || len(dos) != 2 {
					t.Fatalf("spans: got %d acquires and %d Do, want 2 each", len(waits), len(dos))
				}
				if !slicesAny(waits, func(s sdktrace.ReadOnlySpan) bool {
					return hasEvent(s, "queued") && hasEvent(s, "woken") && hasEvent(s, "handed over")
				}) {
					t.Errorf("no acquire span has the queued, woken and handed over events")
				}
				r.noOwnerIDs(t, owner, strings.Split(owner, ":")[0])
			})
		})
	}
}

func slicesAny[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if f(v) {
			return true
		}
	}
	return false
}

// TestTelemetryOfALostLease: a lease taken by another owner while Do runs
// is counted as lost, with its reason, its hold as lost, and the Do span ends
// with an error status; a failed refresh is counted and marked on the span.
func TestTelemetryOfALostLease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				r := newRig(t)
				l := k.open(t, b.Client, r.cfg)
				fails := 0
				redistest.Inject(b.Client, &redistest.Fault{Match: func(op string) bool {
					if op == "refresh" && fails == 0 {
						fails++
						return true
					}
					return false
				}, Err: errors.New("injected refresh failure"), Drop: true})
				// The retry of the failed refresh (a twelfth of the ttl
				// later) or the next refresh finds the thief's value, and
				// must do so before the lease's deadline (two thirds of
				// the ttl after the failure), or the loss is counted as
				// unconfirmed instead: a ttl of 3 s leaves a loaded
				// machine 2 s for it.
				err := l.do(ctx, "lost", 3*time.Second, func(ctx context.Context) error {
					// Wait out the failed refresh, then lose the lock.
					for r.value(t, "leasekit.lock.refresh.failures") == 0 {
						time.Sleep(10 * time.Millisecond)
					}
					b.Client.Set(ctx, lockKey("lost"), "thief", time.Minute)
					<-ctx.Done()
					return nil
				})
				if !errors.Is(err, k.lockLost) {
					t.Fatalf("Do: got %v, want ErrLockLost", err)
				}
				if got := r.value(t, "leasekit.lock.lost", reasonKey.String("another_owner")); got != 1 {
					t.Errorf("leases lost to another owner: got %d, want 1", got)
				}
				if got := r.value(t, "leasekit.lock.hold.duration", outcomeKey.String("lost")); got != 1 {
					t.Errorf("holds lost: got %d, want 1", got)
				}
				if got := r.value(t, "leasekit.lock.refresh.failures"); got != 1 {
					t.Errorf("refresh failures: got %d, want 1", got)
				}
				if got := r.value(t, "leasekit.lock.held"); got != 0 {
					t.Errorf("held after the loss: got %d, want 0", got)
				}
				dos := r.ended(k.name + ".Do")
				if len(dos) != 1 || dos[0].Status().Code != codes.Error || !hasEvent(dos[0], "refresh failed") {
					t.Fatalf("Do span: got %d spans, want one with an error status and a refresh failed event", len(dos))
				}
			})
		})
	}
}

// backendBehindProxy runs body on miniredis and on a real redis-server, each
// behind a fault proxy: p delays or freezes what the client sees; direct
// reaches the server itself.
func backendBehindProxy(t *testing.T, body func(t *testing.T, p *faultproxy.Proxy, direct *redis.Client)) {
	t.Run("miniredis", func(t *testing.T) {
		b := redistest.Mini(t)
		body(t, newProxy(t, b.Mini.Addr()), b.Client)
	})
	t.Run("redis-server", func(t *testing.T) {
		srv, direct := startServer(t)
		body(t, newProxy(t, srv.Addr), direct)
	})
}

// TestTelemetryOfOutcomes: each way an acquire ends is its outcome: another
// owner holds the lock (a try, and a wait whose ctx ends), the grant came
// back late (through the fault proxy; a waiting acquire marks its span with
// late grant), the Locker is closed, or Redis refused (a lock key of another
// type). Only not_obtained leaves the span's status unset.
func TestTelemetryOfOutcomes(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			backendBehindProxy(t, func(t *testing.T, p *faultproxy.Proxy, direct *redis.Client) {
				ctx := t.Context()
				r := newRig(t)
				l := k.open(t, proxiedClient(t, p, false), r.cfg)
				if _, err := k.open(t, direct, lockConfig{}).try(ctx, "held", time.Minute); err != nil {
					t.Fatal(err)
				}
				if _, err := l.try(ctx, "held", time.Minute); !errors.Is(err, k.notObtained) {
					t.Fatalf("try of a held lock: %v", err)
				}
				wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				_, err := l.obtain(wctx, "held", time.Minute)
				cancel()
				if !errors.Is(err, k.notObtained) {
					t.Fatalf("wait for a held lock: %v", err)
				}
				direct.RPush(ctx, lockKey("list"), "x")
				if _, err := l.try(ctx, "list", time.Minute); err == nil {
					t.Fatal("try of a list: got a lock")
				}
				// Replies half again as slow as a short lease (as in
				// TestObtainGivesUpOnLateGrants), so that the waiting acquire's
				// three late grants take a second, not many.
				const ttl = 100 * time.Millisecond
				p.Delay(ttl * 3 / 2)
				_, tryErr := l.try(ctx, "late", ttl)
				_, waitErr := l.obtain(ctx, "late-wait", ttl)
				p.Delay(0)
				if !errors.Is(tryErr, k.lateGrant) || !errors.Is(waitErr, k.lateGrant) {
					t.Fatalf("late grants: got %v and %v, want ErrLateGrant", tryErr, waitErr)
				}
				_ = l.close()
				if _, err := l.try(ctx, "closed", time.Minute); !errors.Is(err, k.closed) {
					t.Fatalf("closed: got %v, want ErrClosed", err)
				}
				for outcome, want := range map[string]int64{"not_obtained": 2, "error": 1, "late": 2, "closed": 1} {
					if got := r.value(t, "leasekit.lock.acquire.duration", outcomeKey.String(outcome)); got != want {
						t.Errorf("acquires with outcome %s: got %d, want %d", outcome, got, want)
					}
				}
				try := map[string]string{"efficiency": "TryObtain", "correctness": "TryAcquire"}[k.name]
				wait := map[string]string{"efficiency": "Obtain", "correctness": "Acquire"}[k.name]
				r.outcomeIsStatus(t, 2, append(r.ended(k.name+"."+try), r.ended(k.name+"."+wait)...))
				if !slicesAny(r.ended(k.name+"."+wait), func(s sdktrace.ReadOnlySpan) bool { return hasEvent(s, "late grant") }) {
					t.Errorf("no %s span has the late grant event", wait)
				}
			})
		})
	}
}

// outcomeIsStatus checks the status of acquire spans: not_obtained (n of
// them) is an outcome, with the status unset and no exception event; every
// other outcome but obtained is an error.
func (r *rig) outcomeIsStatus(t *testing.T, n int, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	notObtained := 0
	for _, s := range spans {
		outcome := "none"
		for _, kv := range s.Attributes() {
			if kv.Key == outcomeKey {
				outcome = kv.Value.AsString()
			}
		}
		want := codes.Error
		switch outcome {
		case "not_obtained":
			notObtained++
			want = codes.Unset
		case "obtained":
			want = codes.Unset
		}
		if s.Status().Code != want || hasEvent(s, "exception") != (want == codes.Error) {
			t.Errorf("%s span with outcome %s: got status %v (%d events), want %v with an exception event only if an error",
				s.Name(), outcome, s.Status().Code, len(s.Events()), want)
		}
	}
	if notObtained != n {
		t.Errorf("acquire spans with the attribute %s=not_obtained: got %d, want %d", outcomeKey, notObtained, n)
	}
}

// TestTelemetryOfLossReasons: a lease whose key is deleted is lost with
// reason key_gone; one whose refresh gets no reply before its deadline
// (the proxy holds the replies) with reason unreachable.
func TestTelemetryOfLossReasons(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			backendBehindProxy(t, func(t *testing.T, p *faultproxy.Proxy, direct *redis.Client) {
				ctx := t.Context()
				r := newRig(t)
				l := k.open(t, proxiedClient(t, p, true), r.cfg)
				// A ttl whose first refresh, which sees the key gone, comes
				// soon.
				err := l.do(ctx, "deleted", 1500*time.Millisecond, func(ctx context.Context) error {
					direct.Del(ctx, lockKey("deleted"))
					<-ctx.Done()
					return nil
				})
				if !errors.Is(err, k.lockLost) {
					t.Fatalf("deleted: got %v, want ErrLockLost", err)
				}
				err = l.do(ctx, "unreachable", 600*time.Millisecond, func(ctx context.Context) error {
					p.Delay(time.Second) // every reply, the refreshes' too, comes after the deadline
					<-ctx.Done()
					p.Delay(0)
					return nil
				})
				if !errors.Is(err, k.lockLost) {
					t.Fatalf("unreachable: got %v, want ErrLockLost", err)
				}
				for reason, want := range map[string]int64{"key_gone": 1, "unreachable": 1, "another_owner": 0} {
					if got := r.value(t, "leasekit.lock.lost", reasonKey.String(reason)); got != want {
						t.Errorf("leases lost with reason %s: got %d, want %d", reason, got, want)
					}
				}
			})
		})
	}
}

// TestTelemetryOfTryAndRelease: a try, an explicit release, a Hold and (for
// efficiency) a Once each have a span, and every hold is recorded as
// released.
func TestTelemetryOfTryAndRelease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := redistest.Mini(t)
			r := newRig(t)
			l := k.open(t, b.Client, r.cfg)
			g, err := l.try(t.Context(), "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.release(t.Context()); err != nil {
				t.Fatal(err)
			}
			g, err = l.try(t.Context(), "held", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.hold(t.Context(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"Release": 1, "Hold": 1}
			want[map[string]string{"efficiency": "TryObtain", "correctness": "TryAcquire"}[k.name]] = 2
			holds := 2
			if l.once != nil {
				if _, err := l.once(t.Context(), "tick", time.Minute, func(context.Context) error { return nil }); err != nil {
					t.Fatal(err)
				}
				want["Once"], want["TryObtain"], holds = 1, 3, 3
			}
			for op, n := range want {
				if got := len(r.ended(k.name + "." + op)); got != n {
					t.Errorf("%s spans: got %d, want %d", op, got, n)
				}
			}
			if got := r.value(t, "leasekit.lock.hold.duration", outcomeKey.String("released")); got != int64(holds) {
				t.Errorf("holds released: got %d, want %d", got, holds)
			}
		})
	}
}

// blockingExporter never returns until the test ends; failingExporter
// always fails. Neither may hold up or fail a lock operation.
type blockingExporter struct{ done <-chan struct{} }

func (e blockingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	return ctx.Err()
}
func (blockingExporter) Shutdown(context.Context) error { return nil }

func (e blockingExporter) Export(ctx context.Context, _ *metricdata.ResourceMetrics) error {
	return e.ExportSpans(ctx, nil)
}
func (blockingExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}
func (blockingExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}
func (blockingExporter) ForceFlush(context.Context) error { return nil }

type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("exporter down")
}
func (failingExporter) Shutdown(context.Context) error { return nil }
func (failingExporter) Export(context.Context, *metricdata.ResourceMetrics) error {
	return errors.New("exporter down")
}
func (failingExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}
func (failingExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}
func (failingExporter) ForceFlush(context.Context) error { return nil }

// TestTelemetryNeverChangesLocking: with exporters that block forever, or
// fail every export, behind a batch span processor and a periodic reader
// that export every few milliseconds, acquires, refreshes and releases go on
// as without telemetry.
func TestTelemetryNeverChangesLocking(t *testing.T) {
	// The SDK reports each failed export to the global error handler, which
	// logs it: quiet, so the test's output stays readable.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	for _, name := range []string{"blocking", "failing"} {
		for _, k := range kinds {
			t.Run(name+"/"+k.name, func(t *testing.T) {
				done := make(chan struct{})
				var exp interface {
					sdktrace.SpanExporter
					sdkmetric.Exporter
				} = failingExporter{}
				if name == "blocking" {
					exp = blockingExporter{done}
				}
				b := redistest.Mini(t)
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(5*time.Millisecond))))
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(5*time.Millisecond), sdktrace.WithMaxQueueSize(4)))
				t.Cleanup(func() {
					close(done) // the blocking exporter returns, and the SDK can shut down
					_ = mp.Shutdown(context.Background())
					_ = tp.Shutdown(context.Background())
				})
				l := k.open(t, b.Client, lockConfig{meters: mp, tracer: tp})
				refreshes := redistest.Count(b.Client)
				// A ttl whose refreshes (every ttl/3) a loaded machine cannot
				// starve past the deadline: this checks that locking goes on,
				// not how fast.
				for range 5 {
					err := l.do(t.Context(), "job", 600*time.Millisecond, func(context.Context) error {
						refreshes.Await(t, "refresh", refreshes.Of("refresh")+1) // the lease is refreshed
						return nil
					})
					if err != nil {
						t.Fatalf("Do with a %s exporter: %v", name, err)
					}
				}
			})
		}
	}
}
