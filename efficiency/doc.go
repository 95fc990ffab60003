// Package efficiency provides Redis locks that stop two workers from doing the
// same work at the same time, when an overlap costs duplicate work and nothing
// worse.
//
// An efficiency lock is a lease: SET key owner NX PX ttl, released by a script
// that acts only for the owner, handing the lock to the next queued waiter or
// deleting it. It guarantees that while Redis keeps the key, no
// other owner is granted the lock. It does NOT guarantee that two holders never
// act at once: a holder that pauses (a GC pause, a VM migration, SIGSTOP) past
// its ttl wakes up still believing it holds the lock while another owner holds
// it too, and no client-side check can prevent that, because the pause can land
// after any check. A failover to a replica that missed the grant, or a restart
// of a Redis without persistence, can also hand the lock out twice; so can a
// forward step of the Redis server's clock (NTP), which expires the key
// early: the holder's Do learns of it at its next refresh, up to a third of
// the ttl later, and runs on until then beside the new holder.
//
// Use it for cron-style jobs that should not run twice at once, cache rebuilds,
// and other work where an overlap is waste, not damage. When an overlap would
// corrupt data or spend money twice, use package correctness, whose fencing
// tokens let the resource itself reject a stale holder.
//
// A Locker serves any number of locks over one go-redis client. TryObtain makes
// one attempt. Obtain waits without polling: the holder's release tells it
// ([docs/waiting.md] explains how, and what happens when a waiter, a holder or
// Redis fails). Do holds a lock while a function runs and cancels the
// function's context when the lease is lost; Once runs a function at most once
// per period across replicas.
//
// A Semaphore lets up to N holders in at once: its permits are Locks, its
// waiters queue and are handed released permits in arrival order, and a
// dead holder's permit frees itself at its ttl ([docs/semaphore.md]).
// Semaphores are efficiency locks only. A fencing token works because the
// resource can refuse every token older than the newest it has seen: with N
// holders at once, N tokens are current, and that rule would refuse all but
// one of them, while any weaker rule would also accept a holder whose permit
// was lost.
//
// Every key of a lock (the lock at <prefix>{name}, its wait queue) carries the
// hash tag {name}, so that a lock's keys stay in one Redis Cluster slot; so
// do a semaphore's.
//
// An uncontended TryObtain and Release cost two round trips to Redis, the
// minimum. A TryObtain that finds the lock held reads the holder in a second
// round trip, so that a go-redis retry after a lost reply is recognised as the
// caller's own grant and never reported as "not obtained".
//
// A Locker records OpenTelemetry metrics and spans (WithMeterProvider,
// WithTracerProvider); [docs/telemetry.md] lists every one.
//
// [docs/waiting.md]: https://github.com/leasekit/leasekit/blob/main/docs/waiting.md
// [docs/semaphore.md]: https://github.com/leasekit/leasekit/blob/main/docs/semaphore.md
// [docs/telemetry.md]: https://github.com/leasekit/leasekit/blob/main/docs/telemetry.md
package efficiency
