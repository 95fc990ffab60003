package lease

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// minTTL is the shortest lease Redis can express (PX takes milliseconds).
const minTTL = time.Millisecond

// CheckName reports whether name can name a lock or resource. An empty name is
// refused, and so is one starting with '}', which would give the key an empty
// hash tag and scatter a lock's keys over Redis Cluster slots.
func CheckName(invalid error, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", invalid)
	case strings.HasPrefix(name, "}"):
		return fmt.Errorf("%w: the name %s starts with '}'", invalid, Quote(name))
	}
	return nil
}

// checkTTL reports whether ttl is a lease length Redis can hold.
func checkTTL(invalid error, ttl time.Duration) error {
	if ttl < minTTL {
		return fmt.Errorf("%w: %v is shorter than %v", invalid, ttl, minTTL)
	}
	return nil
}

// Millis is ttl in whole milliseconds, at least 1.
func Millis(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// Quote quotes a name for an error message, cut short if it is long.
func Quote(name string) string {
	const most = 64
	if len(name) > most {
		return fmt.Sprintf("%q…(%d bytes)", name[:most], len(name))
	}
	return fmt.Sprintf("%q", name)
}

// DefaultDriftFactor is the share of a ttl kept in reserve for clock drift
// unless an option sets another.
const DefaultDriftFactor = 0.01

// DriftFactor clamps a drift factor option to [0, 0.5]; NaN, which no clamp
// catches, becomes the default.
func DriftFactor(f float64) float64 {
	if math.IsNaN(f) {
		return DefaultDriftFactor
	}
	return min(max(f, 0), 0.5)
}
