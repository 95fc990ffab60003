// Package history holds leasekit's reliability tests that watch many clients
// at once and judge what they saw, rather than one scripted scenario:
//
//   - a history check: concurrent Register writes and reads by holders of
//     short correctness leases, and the tokens of successive grants, recorded
//     with monotonic timestamps and checked for linearizability with porcupine
//     against a fenced-register model and a fetch-and-increment model;
//   - eviction: Audit flags an evicting maxmemory-policy, and a full server
//     under noeviction makes every acquire fail with a clear error, never a
//     grant;
//   - foreign hands: 100,000 releases and refreshes with wrong owner ids leave
//     the holder's key untouched;
//   - a soak: 64 goroutines on 1,000 keys mixing both kinds of lock for 20
//     seconds (LEASEKIT_SOAK sets another duration; -short runs 3 seconds),
//     with no double holder, no stale write accepted, and goroutines and
//     connections back to their baseline at the end.
//
// The package has no code of its own: everything is in its tests, which run on
// the real redis-server the test harness starts (and on miniredis where that
// adds something).
package history
