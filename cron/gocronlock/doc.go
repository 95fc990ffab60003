// Package gocronlock lets several gocron v2 schedulers, in one process or on
// many machines, share their jobs through a leasekit efficiency lock in Redis,
// so that each run of a job happens on one scheduler only. Its Elector lets
// them elect a leader instead, which runs every job: see Elector for when to
// pick which.
//
// The Locker is an efficiency lock, with that guarantee and no more: while
// Redis keeps the key, no other scheduler is granted the job. A scheduler that
// pauses (a GC pause, a VM migration) past its lease can still be running the
// job while another starts it, and a Redis failover or restart without
// persistence can grant it twice. Use it where a duplicate run is waste, not
// damage. gocron's Locker has no room for a fencing token; for a job whose
// overlap would corrupt data, take a correctness lease inside the job instead.
//
// # The minimum hold
//
// gocron asks the Locker for the job's name, not for the tick, each time the
// job fires on a scheduler, and unlocks when the run ends. Schedulers' clocks
// differ, by milliseconds with NTP and by more without it. A job that takes
// less than that difference would be unlocked by the earliest scheduler before
// a later one asks, and would run again for the same tick (the gap gocron's own
// Locker docs leave to the implementation). So Unlock keeps the lock until the
// minimum hold has passed since it was taken: it shortens the lease to what is
// left of the minimum hold, or releases the lock if it has passed. A scheduler
// whose clock is behind by less than the minimum hold finds the tick taken.
//
// Choose the minimum hold longer than the largest clock difference between
// schedulers (plus the few milliseconds gocron takes to start a run) and
// shorter than the job's interval minus that difference, or the next tick finds
// the lock still held everywhere and is skipped. Half the shortest interval is
// a sound choice. The default, one second, suits jobs that run every two
// seconds or less often. Jobs with different intervals can each get their own
// Locker through gocron.WithDistributedJobLocker.
//
// # The lease while a job runs
//
// Locker takes the lock with efficiency.Locker.Once, whose period is the
// minimum hold: the lease lasts the minimum hold and, while the job runs past
// it, is refreshed every third of it and kept at least half of it ahead. A
// scheduler that crashes mid-run therefore blocks the job for at most the
// minimum hold; a run past the minimum hold loses its lease if its process
// stalls for more than about a sixth of the minimum hold. When the context
// gocron passes to Lock ends (the job was removed, the scheduler is shutting
// down), the refreshes stop and the hold ends as at Unlock.
//
// If the lease is lost during a run (a refresh finds the key gone, or Redis
// cannot confirm it in time), the job is not interrupted: gocron gives a
// Locker no way to stop it. Unlock then returns an error matching
// efficiency.ErrLockLost, which gocron discards; WithLogger logs it.
//
// The lock of a job is the efficiency lock called by the job's name: give each
// job a unique name with gocron.WithName, the same on every scheduler. Without
// one, gocron names a job after its function, so that two jobs running the same
// function share one lock.
package gocronlock
