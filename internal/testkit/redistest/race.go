package redistest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Race starts n goroutines at once, each calling try once, and returns how
// many succeeded. An error matching lost is a lost race; any other error
// fails the test.
func Race(t testing.TB, n int, lost error, try func() error) int {
	t.Helper()
	var wins atomic.Int32
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			switch err := try(); {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, lost):
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("racer: %v", err)
	}
	return int(wins.Load())
}
