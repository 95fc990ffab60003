package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// leading reads the leasekit.election.leader gauge.
func leading(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	return sum(t, reader, "leasekit.election.leader")
}

// awaitLeading waits until the gauge reads want, for up to ten seconds (a
// bound for a hung test, not a timing assertion).
func awaitLeading(t *testing.T, reader *sdkmetric.ManualReader, want int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); leading(t, reader) != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("leasekit.election.leader: got %d, want %d", leading(t, reader), want)
		}
	}
}

// TestElectionTelemetry: leasekit.election.leader is 1 while the Locker
// leads, and 0 once the term ends: when fn returns, or as soon as the term is
// lost, while fn still runs. A Campaign is a span with the term, whose
// children are the wait (Acquire) and the term (Lead).
func TestElectionTelemetry(t *testing.T) {
	b := redistest.Mini(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	l := newCorrectness(t, b, correctness.WithAudit(false), correctness.WithMeterProvider(mp), correctness.WithTracerProvider(tp))
	ctx := t.Context()

	var term uint64
	err := l.Campaign(ctx, "gauge", time.Minute, nil, func(ctx context.Context, tm uint64) error {
		term = tm
		if got := leading(t, reader); got != 1 {
			t.Errorf("while leading: got %d, want 1", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := leading(t, reader); got != 0 {
		t.Fatalf("after the term: got %d, want 0", got)
	}

	err = l.Campaign(ctx, "gauge", 3*time.Second, nil, func(ctx context.Context, tm uint64) error {
		awaitLeading(t, reader, 1)
		b.Client.Set(ctx, scripts.LockKey(lease.DefaultPrefix, "gauge"), "usurper:1", time.Minute)
		<-ctx.Done()
		awaitLeading(t, reader, 0) // fn has not returned
		return nil
	})
	if !errors.Is(err, correctness.ErrLockLost) {
		t.Fatalf("deposed: got %v, want ErrLockLost", err)
	}
	if got := leading(t, reader); got != 0 {
		t.Fatalf("after a lost term: got %d, want 0", got)
	}

	var campaigns []sdktrace.ReadOnlySpan
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
		if s.Name() == "correctness.Campaign" {
			campaigns = append(campaigns, s)
		}
	}
	if len(campaigns) != 2 {
		t.Fatalf("got %d correctness.Campaign spans, want 2", len(campaigns))
	}
	first := campaigns[0]
	if !hasAttr(first, "leasekit.election.term", attribute.Int64Value(int64(term))) {
		t.Errorf("the Campaign span has no term %d: %v", term, first.Attributes())
	}
	children := map[string]bool{}
	for _, s := range spans.Ended() {
		if p := byID[s.Parent().SpanID().String()]; p == first {
			children[s.Name()] = true
		}
	}
	if !children["correctness.Acquire"] || !children["correctness.Lead"] {
		t.Errorf("the Campaign span's children: %v, want correctness.Acquire and correctness.Lead", children)
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key string, v attribute.Value) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key && kv.Value == v {
			return true
		}
	}
	return false
}
