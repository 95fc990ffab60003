package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/backoff"
)

func TestNextDoublesToMaxAndResets(t *testing.T) {
	b := backoff.Backoff{First: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("pause %d: got %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 10*time.Millisecond {
		t.Fatalf("after Reset: got %v, want the first pause", got)
	}
}

func TestSleepEndsWithTheContextOrDone(t *testing.T) {
	b := backoff.Backoff{First: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if b.Sleep(ctx, nil) {
		t.Fatal("Sleep with an ended context: got true, want false")
	}
	done := make(chan struct{})
	close(done)
	if b.Sleep(t.Context(), done) {
		t.Fatal("Sleep with done closed: got true, want false")
	}
	short := backoff.Backoff{First: time.Millisecond, Max: time.Millisecond}
	if !short.Sleep(t.Context(), nil) {
		t.Fatal("Sleep of a millisecond: got false, want true")
	}
}
