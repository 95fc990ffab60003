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
// of a Redis without persistence, can also hand the lock out twice.
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
// Every key of a lock (the lock at <prefix>{name}, its wait queue) carries the
// hash tag {name}, so that a lock's keys stay in one Redis Cluster slot.
//
// An uncontended TryObtain and Release cost two round trips to Redis, the
// minimum. A TryObtain that finds the lock held reads the holder in a second
// round trip, so that a go-redis retry after a lost reply is recognised as the
// caller's own grant and never reported as "not obtained".
//
// # Telemetry
//
// A Locker records OpenTelemetry metrics and spans, through the API only
// (WithMeterProvider, WithTracerProvider; default the global providers, which
// cost an atomic load per operation until a program installs an SDK). The
// instrumentation scope is github.com/leasekit/leasekit; durations are in
// seconds; every metric has the attribute leasekit.lock.kind (efficiency or
// correctness):
//
//   - leasekit.lock.acquire.duration (histogram): from an acquire's call to
//     its return, waiting included; leasekit.lock.outcome (obtained,
//     not_obtained, late, closed, error) and leasekit.lock.waited.
//   - leasekit.lock.hold.duration (histogram): from a grant to its release
//     or loss; leasekit.lock.outcome released or lost.
//   - leasekit.lock.lost (counter): leases lost while held, by
//     leasekit.lock.lost.reason: key_gone, another_owner, unreachable.
//   - leasekit.lock.refresh.failures (counter): refreshes that failed; the
//     lease may still be confirmed by a later one.
//   - leasekit.lock.waiters, leasekit.lock.held (up-down counters): this
//     Locker's acquires waiting now, and the locks it granted that have not
//     been released or seen lost.
//   - leasekit.lock.handoffs (counter): grants a release handed straight to
//     a queued waiter.
//
// Spans: one per acquire (efficiency.TryObtain, efficiency.Obtain), with the
// events queued, woken, handed over and late grant, and the attributes
// leasekit.lock.outcome and leasekit.lock.waited; an acquire that ends
// not_obtained (the lock is held, or ctx ended first) leaves the span's status
// unset, since that is an outcome, not an error. One per Do, Hold and Once
// around its function, with an event for each failed refresh and an error
// status when the lease is lost; one per Release. No attribute or event
// carries an owner id, and lock names appear only through
// WithLockNameAttribute: names made up as you go would make a metric series
// each. Telemetry never holds up or fails a lock operation: the SDK's
// exporters run on their own goroutines (a batch span processor, a periodic
// reader), so a slow or failing exporter drops data instead. A
// SimpleSpanProcessor, which exports as each span ends, would make ending a
// span wait for it: use it in tests only.
//
// [docs/waiting.md]: https://github.com/leasekit/leasekit/blob/main/docs/waiting.md
package efficiency
