package telemetry_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/leasetest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A Locker's metrics, collected by the OpenTelemetry SDK with a ManualReader
// (a program would use a PeriodicReader, or the Prometheus exporter): two
// Do calls on one lock, the second waiting for the first, which hands it
// over on release. (efficiency.ExampleWithMeterProvider shows the wiring
// with the OTel API alone.)
func Example_meterProvider() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer meters.Shutdown(context.Background())
	locker := efficiency.New(env.Client, efficiency.WithMeterProvider(meters))
	defer locker.Close()
	ctx := context.Background()

	holding, done := make(chan struct{}), make(chan error)
	go func() {
		done <- locker.Do(ctx, "report", time.Minute, func(context.Context) error {
			close(holding)
			for waiting(reader) == 0 { // until the second Do waits for the lock
				time.Sleep(time.Millisecond)
			}
			return nil
		})
	}()
	<-holding
	if err := locker.Do(ctx, "report", time.Minute, func(context.Context) error { return nil }); err != nil {
		fmt.Println(err)
	}
	if err := <-done; err != nil {
		fmt.Println(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var n int64
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					n += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					n += int64(p.Count)
				}
			}
			lines = append(lines, fmt.Sprintf("%s %d", m.Name, n))
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// leasekit.lock.acquire.duration 2
	// leasekit.lock.handoffs 1
	// leasekit.lock.held 0
	// leasekit.lock.hold.duration 2
	// leasekit.lock.waiters 0
}

// waiting is the leasekit.lock.waiters gauge that reader has collected.
func waiting(reader *sdkmetric.ManualReader) int64 {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		return 0
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "leasekit.lock.waiters" && len(d.DataPoints) > 0 {
				return d.DataPoints[0].Value
			}
		}
	}
	return 0
}
