package main

import (
	"fmt"
	"slices"
	"time"
)

// samples is a set of measured durations.
type samples []time.Duration

// quantile returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank method, or 0
// for no samples. It sorts s in place.
func (s samples) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (s samples) p50() time.Duration { return s.quantile(0.50) }
func (s samples) p99() time.Duration { return s.quantile(0.99) }
func (s samples) max() time.Duration { return s.quantile(1) }

// mean returns the average, or 0 for no samples.
func (s samples) mean() time.Duration {
	if len(s) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s))
}

// ratio returns a / b, or 0 when b is 0 (nothing to compare with).
func ratio[T ~int64 | ~float64](a, b T) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// perSecond returns how many ops ran per second of elapsed time.
func perSecond(ops int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(ops) / elapsed.Seconds()
}

// fmtDur prints d with three significant digits in the unit that suits it.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	}
	return sig3(d.Seconds()) + "s"
}

// sig3 prints v (≥ 1) with three significant digits.
func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
