package lease

import "github.com/leasekit/leasekit/internal/telemetry"

// What an election (correctness.Locker.Campaign) needs of the engine beyond
// a lock: the grant's stored value, for the scripts that check that the
// candidate still holds it, and the Core's telemetry and state.

// The election's keys and notices are in package scripts (keys.go).

// Value is what the grant stored in the lock: "owner:token" for a fenced
// grant (scripts/wire.go). It proves the grant: never log it.
func (h *Held) Value() string { return h.value }

// Telemetry is where the Core records; nil records nothing.
func (c *Core) Telemetry() *telemetry.Telemetry { return c.cfg.Telemetry }

// Closed reports whether Close has been called.
func (c *Core) Closed() bool { return c.closed.Load() }
