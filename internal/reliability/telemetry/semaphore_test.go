package telemetry_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"go.opentelemetry.io/otel/attribute"
)

// TestSemaphoreTelemetry: permits count in the held and waiters gauges,
// with the attribute leasekit.lock.limit; their spans are named
// efficiency.Semaphore.*, with the limit too.
func TestSemaphoreTelemetry(t *testing.T) {
	b := redistest.Mini(t)
	ctx := t.Context()
	mp, reader, tp, spans := providers(t)
	count := redistest.Count(b.Client)
	l := newEfficiency(t, b, efficiency.WithMeterProvider(mp), efficiency.WithTracerProvider(tp))
	s := l.Semaphore("tel", 2)
	limit := attribute.Int("leasekit.lock.limit", 2)
	var held []*efficiency.Lock
	for range 2 {
		lock, err := s.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lock)
	}
	if _, err := l.TryObtain(ctx, "tel", time.Minute); err != nil {
		t.Fatal(err) // a lock of the same name: another resource
	}
	got := make(chan error, 1)
	go func() { got <- s.Do(ctx, time.Minute, func(context.Context) error { return nil }) }()
	count.Await(t, "sem_wait", 1)
	for name, want := range map[string]int64{"leasekit.lock.held": 2, "leasekit.lock.waiters": 1} {
		if n := sum(t, reader, name, limit); n != want {
			t.Errorf("%s with the limit: got %d, want %d", name, n, want)
		}
	}
	if n := sum(t, reader, "leasekit.lock.held"); n != 3 {
		t.Errorf("leasekit.lock.held: got %d, want 3, two permits and a lock", n)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := sum(t, reader, "leasekit.lock.held", limit); n != 1 {
		t.Errorf("held permits after a release and a Do: got %d, want 1", n)
	}
	if n := sum(t, reader, "leasekit.lock.handoffs", limit); n != 1 {
		t.Errorf("handoffs: got %d, want 1", n)
	}
	names := map[string]int{}
	for _, span := range spans.Ended() {
		if strings.Contains(span.Name(), "Semaphore") {
			names[span.Name()]++
			if !slices.Contains(span.Attributes(), limit) {
				t.Errorf("span %s: attributes %v, want the limit", span.Name(), span.Attributes())
			}
		}
	}
	for _, want := range []string{"efficiency.Semaphore.TryAcquire", "efficiency.Semaphore.Acquire", "efficiency.Semaphore.Do", "efficiency.Semaphore.Release"} {
		if names[want] == 0 {
			t.Errorf("no span %s among %v", want, names)
		}
	}
}
