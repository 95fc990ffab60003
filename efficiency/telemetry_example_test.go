package efficiency_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/leasetest"
	"go.opentelemetry.io/otel"
)

// A Locker records its metrics and spans through the OpenTelemetry API: on
// the providers given here, or by default on the global ones. A program
// installs an SDK's providers, with an exporter, once at start
// (otel.SetMeterProvider, otel.SetTracerProvider); until then they record
// nothing. docs/telemetry.md lists the instruments and spans.
func ExampleWithMeterProvider() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	locker := efficiency.New(env.Client,
		efficiency.WithMeterProvider(otel.GetMeterProvider()),
		efficiency.WithTracerProvider(otel.GetTracerProvider()),
	)
	defer locker.Close()

	err = locker.Do(context.Background(), "report", time.Minute, func(context.Context) error {
		fmt.Println("holding report")
		return nil
	})
	fmt.Println(err)
	// Output:
	// holding report
	// <nil>
}
