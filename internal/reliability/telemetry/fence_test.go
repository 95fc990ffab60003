package telemetry_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/reliability/sqltest"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// rejections collects leasekit.fence.rejections from reader, by fence and
// reason ("register/stale").
func rejections(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int64)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "leasekit.fence.rejections" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				fence, _ := p.Attributes.Value(attribute.Key("leasekit.fence"))
				reason, _ := p.Attributes.Value(attribute.Key("leasekit.fence.reason"))
				got[fence.AsString()+"/"+reason.AsString()] += p.Value
			}
		}
	}
	return got
}

// TestFenceRejectionsAreCounted: a write or claim with an older token,
// refused by the Register, by ExecFenced, QueryRowFenced or the FencingProxy,
// counts in leasekit.fence.rejections with the fence that refused it and the
// reason stale; a token beyond the clock ceiling with the reason ahead; an
// accepted write does not.
func TestFenceRejectionsAreCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	ctx := t.Context()

	backends := int64(0) // one register rejection per backend that ran
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		backends++
		reg := correctness.NewRegister(b.Client, correctness.WithMeterProvider(mp))
		if err := reg.Write(ctx, "acct", 2, []byte("new")); err != nil {
			t.Fatal(err)
		}
		if err := reg.Write(ctx, "acct", 1, []byte("stale")); !errors.Is(err, correctness.ErrStaleToken) {
			t.Fatalf("stale write: got %v", err)
		}
		if _, _, err := reg.Claim(ctx, "acct", math.MaxUint64); !errors.Is(err, correctness.ErrInvalidToken) {
			t.Fatalf("forged claim: got %v", err)
		}
	})

	proxy := correctness.NewFencingProxy(http.NotFoundHandler(), correctness.WithProxyMeterProvider(mp))
	for _, token := range []string{"5", "4"} {
		r := httptest.NewRequest(http.MethodPut, "/doc", nil)
		r.Header.Set("Fencing-Token", token)
		proxy.ServeHTTP(httptest.NewRecorder(), r)
	}

	// ExecFenced has no options: it counts on the global meter provider.
	otel.SetMeterProvider(mp)
	db := sqltest.SQLite(t)
	sqltest.Create(t, db, "acct")
	if err := correctness.ExecFenced(ctx, db, sqltest.Update, "v", correctness.TokenArg(9), "acct"); err != nil {
		t.Fatal(err)
	}
	if err := correctness.ExecFenced(ctx, db, sqltest.Update, "v", correctness.TokenArg(8), "acct"); !errors.Is(err, correctness.ErrStaleToken) {
		t.Fatalf("stale exec: got %v", err)
	}
	var v string
	if err := correctness.QueryRowFenced(ctx, db, sqltest.Claim, correctness.TokenArg(7), "acct").Scan(&v); !errors.Is(err, correctness.ErrStaleToken) {
		t.Fatalf("stale claim: got %v", err)
	}

	got := rejections(t, reader)
	want := map[string]int64{"register/stale": backends, "register/ahead": backends, "http/stale": 1, "sql/stale": 2}
	for fence, n := range want {
		if got[fence] != n {
			t.Errorf("rejections by %s: got %d, want %d (all: %v)", fence, got[fence], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("rejections: got %v, want only %v", got, want)
	}
}
