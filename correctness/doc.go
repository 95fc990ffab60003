// Package correctness provides Redis locks whose every grant carries a fencing
// token, and the checks at the resource that reject a write from a superseded
// holder.
//
// A correctness lock is only as safe as the checks at the resource. A lease
// can expire while its holder is paused (GC, VM migration, SIGSTOP); the
// holder wakes up still believing it holds the lock. A resource that
// remembers the highest token that has touched it, and refuses older ones in
// the same atomic step as the write, refuses that holder's late writes. What
// it cannot refuse is a write computed from a read the successor made too: a
// holder that reads, computes and writes back must claim the resource with
// its token when it reads (Register.Claim, an UPDATE ... RETURNING through
// QueryRowFenced, any request through FencingProxy), or a paused
// predecessor's write, accepted before the successor writes, is lost under
// the successor's. Every write path must check: one unfenced path makes the
// whole system unfenced. Without such a check this is only an efficiency
// lock.
//
// Tokens are only as monotonic as Redis keeps them. The counter lives in
// Redis: a restart without AOF (appendfsync always), an eviction, or a failover
// to a replica that missed the last grant can lose it. The clock floor (on by
// default) makes the next token max(counter + 1, server clock in µs), which
// turns those losses into the much rarer failure of a server clock that jumps
// back further than the outage lasted. It is no substitute for a
// consensus-backed store: WithTokens draws the tokens from one instead
// (package etcdtokens, etcd), while waiting and handoff stay in Redis.
// Audit inspects the deployment and reports what threatens these
// properties; the first Acquire of a Locker logs its findings.
// The floor also bounds what a forged token can do: with it, a fence that
// reads the Redis clock (Register, FencingProxy with WithProxyStore) refuses
// a token more than an hour ahead of that clock in microseconds, which no
// Locker issues, with ErrInvalidToken.
//
// Each grant is one script, and a retried one is the same grant: go-redis
// sends a command again after a lost reply, and the acquire it resends gets
// back the grant and token the first send made, never a second token and never
// "not obtained". That, with the clock floor, keeps a token unique to one
// grant, which is why every fence accepts a token equal to the highest it has
// seen: it is the same holder writing again.
//
// The fences: Register (a fenced value per resource in Redis), ExecFenced and
// QueryRowFenced (conditional SQL UPDATEs) and FencingProxy (an http.Handler
// that forwards a request only with the newest Fencing-Token for its
// resource). How the paused-holder failures play out, who may send tokens,
// and where fencing still breaks: [docs/fencing.md].
//
// Campaign, Leader and Observe elect a leader on the same locks: a leader's
// term is its grant's fencing token, which the fences check unchanged, so a
// deposed leader's writes are refused ([docs/election.md]).
//
// TryAcquire, Acquire, Do and a Lease's methods behave as their counterparts
// in package efficiency, and Acquire waits as Obtain does
// ([docs/waiting.md]). Where a doc here says what differs and links to its
// counterpart for the rest, read that doc with this package's names:
// TryAcquire and Acquire for TryObtain and Obtain, a Lease for a Lock, and
// this package's errors for efficiency's of the same names, which errors.Is
// does not take for each other. A lock's fence counter key lives forever by
// default, and a Register's key always does: a program that makes lock or
// resource names up as it goes (one per user, per order) should read
// WithExpiringCounter and NewRegister.
//
// A Locker's metrics and spans are efficiency's, with leasekit.lock.kind
// correctness; every fence counts what it refuses in
// leasekit.fence.rejections, and an election adds leasekit.election.leader
// and a span per Campaign. [docs/telemetry.md] lists them all.
//
// [docs/election.md]: https://github.com/leasekit/leasekit/blob/main/docs/election.md
// [docs/fencing.md]: https://github.com/leasekit/leasekit/blob/main/docs/fencing.md
// [docs/telemetry.md]: https://github.com/leasekit/leasekit/blob/main/docs/telemetry.md
// [docs/waiting.md]: https://github.com/leasekit/leasekit/blob/main/docs/waiting.md
package correctness
