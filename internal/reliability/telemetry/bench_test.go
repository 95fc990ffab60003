package telemetry_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkUncontendedTelemetry is an uncontended TryObtain + Release on a
// real server with telemetry: the default (global, no SDK installed), the
// OpenTelemetry SDK's metrics (a ManualReader that is never read), and the
// SDK's metrics and traces (every span sampled, into a batch processor with
// no exporter). Read allocs/op against the default's, in the same run;
// efficiency.BenchmarkUncontended compares the default with two PINGs.
func BenchmarkUncontendedTelemetry(b *testing.B) {
	be := redistest.Real(b)
	ctx := b.Context()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tracer := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	sampled := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(0.01)))
	b.Cleanup(func() {
		// b.Context() has ended by the time cleanups run: shut down on one
		// that has not, or the providers' goroutines outlive the test.
		ctx := context.WithoutCancel(ctx)
		_ = meters.Shutdown(ctx)
		_ = tracer.Shutdown(ctx)
		_ = sampled.Shutdown(ctx)
	})
	for _, tc := range []struct {
		name string
		opts []efficiency.Option
	}{
		{"default", nil},
		{"sdk-metrics", []efficiency.Option{efficiency.WithMeterProvider(meters)}},
		{"sdk-metrics+traces", []efficiency.Option{efficiency.WithMeterProvider(meters), efficiency.WithTracerProvider(tracer)}},
		{"sdk-metrics+traces-1%", []efficiency.Option{efficiency.WithMeterProvider(meters), efficiency.WithTracerProvider(sampled)}},
	} {
		l := efficiency.New(be.Client, tc.opts...)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				lock, err := l.TryObtain(ctx, "bench", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := lock.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
		_ = l.Close()
	}
}

// processCPU is this process's CPU time, user and system, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
