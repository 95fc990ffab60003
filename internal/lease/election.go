package lease

import "github.com/leasekit/leasekit/internal/telemetry"

// What an election (correctness.Locker.Campaign) needs of the engine beyond
// a lock: the grant's stored value, for the scripts that check that the
// candidate still holds it, and the Core's telemetry and state.

// The election's wire format (correctness.Locker.Campaign, Observe, Leader
// and Proclaim run the scripts that read and write it:
// scripts/election_*.lua; refresh.lua writes a leader key back).
//
// An election called name is the correctness lock called name: its key,
// queue and fence counter. Beside them, in the same Cluster slot:
//
//	leader key  <prefix>{name}:leader, a hash: grant = the lock's value when
//	            its holder took office ("owner:token"), value = its value;
//	            it expires with the lease (refresh.lua keeps it alive)
//	channel     <prefix>{name}:leader, plain pub/sub
//
// The lock's holder leads when the leader key's grant is the lock's value
// (without the waiters' mark, see handoff.go); a leader key left by an earlier
// grant names nobody. The messages on the channel:
//
//	notice   = "elected" SP term SP ttl SP value | "vacant" SP term
//
// elected: the holder of the grant whose token is term took office (or
// wrote its leader key back) with ttl ms left on its lease (-1: no expiry);
// value is the rest of the message, any bytes. vacant: the leader of term
// left office, and nobody holds the lock. Anyone who may PUBLISH can send
// these, so leasekit takes a notice as a hint to read the keys, never as
// the news itself (correctness/observe.go); other readers should do the
// same.

// LeaderKey is the key of the leader of the election whose lock is at
// lockKey: its value and the grant that wrote it.
func LeaderKey(lockKey string) string { return lockKey + ":leader" }

// Value is what the grant stored in the lock: "owner:token" for a fenced
// grant (see handoff.go). It proves the grant: never log it.
func (h *Held) Value() string { return h.value }

// Telemetry is where the Core records; nil records nothing.
func (c *Core) Telemetry() *telemetry.Telemetry { return c.cfg.Telemetry }

// Closed reports whether Close has been called.
func (c *Core) Closed() bool { return c.closed.Load() }
