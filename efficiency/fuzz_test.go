package efficiency_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/leasetest"
)

// FuzzObtain feeds arbitrary lock names and ttls to TryObtain: the result is a
// lock (then released) or a sentinel error, never a panic or another error.
// The seeds run with every go test; go test -fuzz=FuzzObtain explores more.
func FuzzObtain(f *testing.F) {
	seeds := []string{"", "job", "{", "}", "}x", "a}b", "{a}", "{}", "\n", "a\r\nb", "\x00\xff", "ключ", strings.Repeat("k", 1<<20)}
	for _, name := range seeds {
		for _, ttl := range []int64{int64(time.Second), 0, -1, int64(time.Millisecond) - 1, 1 << 62} {
			f.Add(name, ttl)
		}
	}
	env := leasetest.New(f)
	l := efficiency.New(env.Client)
	f.Cleanup(func() { _ = l.Close() })
	f.Fuzz(func(t *testing.T, name string, ttl int64) {
		lock, err := l.TryObtain(t.Context(), name, time.Duration(ttl))
		if err != nil {
			// ErrLateGrant: a lease of a millisecond or two can lapse
			// before its reply arrives (and ErrNotObtained, should a late
			// grant's release not have reached Redis).
			if !errors.Is(err, efficiency.ErrInvalidKey) && !errors.Is(err, efficiency.ErrInvalidTTL) &&
				!errors.Is(err, efficiency.ErrLateGrant) && !errors.Is(err, efficiency.ErrNotObtained) {
				t.Fatalf("TryObtain(%q, %v): got %v, want a lock or a sentinel error", trim(name), time.Duration(ttl), err)
			}
			return
		}
		if lock.Key() != "leasekit:{"+name+"}" {
			t.Fatalf("key: got %q", trim(lock.Key()))
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
