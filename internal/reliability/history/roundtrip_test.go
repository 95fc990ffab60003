package history_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// loadedRoundTrip is the 99th percentile of a round trip to client's Redis
// with workers goroutines sending at once, 20 PINGs each, on the machine as
// loaded as it is now. A test that needs a short ttl derives it from this,
// so that a busy machine lengthens the ttl instead of failing the test.
func loadedRoundTrip(t *testing.T, client redis.UniversalClient, workers int) time.Duration {
	t.Helper()
	const each = 20
	var mu sync.Mutex
	var all []time.Duration
	var failed error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, each)
			var err error
			for range each {
				start := time.Now()
				if err = client.Ping(t.Context()).Err(); err != nil {
					break
				}
				lat = append(lat, time.Since(start))
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			if err != nil {
				failed = err
			}
		})
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("PING: %v", failed)
	}
	slices.Sort(all)
	return all[len(all)*99/100]
}

// ttlFor is a ttl of at least floor and at least times the loaded round trip
// that rt measured, capped at most.
func ttlFor(rt time.Duration, times int, floor, most time.Duration) time.Duration {
	return min(max(floor, time.Duration(times)*rt), most)
}
