package telemetry_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// newEfficiency returns an efficiency Locker on b, closed when the test
// ends.
func newEfficiency(t *testing.T, b *redistest.Backend, opts ...efficiency.Option) *efficiency.Locker {
	t.Helper()
	l := efficiency.New(b.Client, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newCorrectness returns a correctness Locker on b that logs nothing,
// closed when the test ends.
func newCorrectness(t *testing.T, b *redistest.Backend, opts ...correctness.Option) *correctness.Locker {
	t.Helper()
	quiet := correctness.WithLogger(slog.New(slog.DiscardHandler))
	l := correctness.New(b.Client, append([]correctness.Option{quiet}, opts...)...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// providers returns the SDK's meter provider, reading into reader, and
// tracer provider, recording into spans, both shut down when the test ends.
func providers(t *testing.T) (mp *sdkmetric.MeterProvider, reader *sdkmetric.ManualReader, tp *sdktrace.TracerProvider, spans *tracetest.SpanRecorder) {
	t.Helper()
	reader, spans = sdkmetric.NewManualReader(), tracetest.NewSpanRecorder()
	mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	return mp, reader, tp, spans
}

// sum is the sum of the metric called name over the data points whose
// attributes include want: a counter's or up-down counter's value.
func sum(t *testing.T, reader *sdkmetric.ManualReader, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			d, ok := m.Data.(metricdata.Sum[int64])
			if !ok || m.Name != name {
				continue
			}
			for _, p := range d.DataPoints {
				if slices.ContainsFunc(want, func(kv attribute.KeyValue) bool { v, ok := p.Attributes.Value(kv.Key); return !ok || v != kv.Value }) {
					continue
				}
				total += p.Value
			}
		}
	}
	return total
}
