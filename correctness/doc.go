// Package correctness provides Redis locks whose every grant carries a fencing
// token, and the checks at the resource that reject a write from a superseded
// holder.
//
// A correctness lock is only as safe as the checks at the resource. A lease
// can expire while its holder is paused (GC, VM migration, SIGSTOP); the
// holder wakes up still believing it holds the lock. Only a resource that
// remembers the highest token it has accepted, and refuses older ones in the
// same atomic step as the write, makes that holder harmless. Every write path
// must check: one unfenced path makes the whole system unfenced. Without such
// a check this is only an efficiency lock.
//
// Tokens are only as monotonic as Redis keeps them. The counter lives in
// Redis: a restart without AOF (appendfsync always), an eviction, or a failover
// to a replica that missed the last grant can lose it. The clock floor (on by
// default) makes the next token max(counter + 1, server clock in µs), which
// turns those losses into the much rarer failure of a server clock that jumps
// back further than the outage lasted. It is no substitute for a
// consensus-backed store. Audit inspects the deployment and reports what
// threatens these properties; the first Acquire of a Locker logs its findings.
//
// The fences: Register (a fenced value per resource in Redis), ExecFenced (a
// conditional SQL UPDATE) and FencingProxy (an http.Handler that forwards a
// request only with the newest Fencing-Token for its resource).
package correctness
