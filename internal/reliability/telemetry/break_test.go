package telemetry_test

import (
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestBreakTelemetry: every Break is an efficiency.Break span, and
// leasekit.lock.breaks counts the breaks that ended a lease: a free lock's
// Break broke nothing. (Break itself: efficiency.TestBreak.)
func TestBreakTelemetry(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		mp, reader, tp, spans := providers(t)
		operator := newEfficiency(t, b, efficiency.WithMeterProvider(mp), efficiency.WithTracerProvider(tp))
		if broken, err := operator.Break(ctx, "broken"); err != nil || broken {
			t.Fatalf("a free lock: got %v, %v, want nothing broken", broken, err)
		}
		if _, err := newEfficiency(t, b).TryObtain(ctx, "broken", time.Minute); err != nil {
			t.Fatal(err)
		}
		if broken, err := operator.Break(ctx, "broken"); err != nil || !broken {
			t.Fatalf("a held lock: got %v, %v, want it broken", broken, err)
		}
		if n := sum(t, reader, "leasekit.lock.breaks"); n != 1 {
			t.Fatalf("leasekit.lock.breaks: got %d, want 1 (the free lock's Break broke nothing)", n)
		}
		breaks := 0
		for _, s := range spans.Ended() {
			if s.Name() == "efficiency.Break" {
				breaks++
			}
		}
		if breaks != 2 {
			t.Fatalf("spans: got %d efficiency.Break, want one per call, 2", breaks)
		}
	})
}
