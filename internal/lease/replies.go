package lease

// The reply codes of the scripts the engine runs, as the Reply section of
// each script's header lists them (scripts/*.lua, one code a line);
// TestReplyCodesMatchTheScripts holds these constants against those lines.

// fenced_acquire.lua: the number it replies when it does not grant is the
// holder's ttl, or this code.
const fencedLapsed int64 = 0 // the holder's lease lapsed with waiters queued

// wait.lua, sem_wait.lua and sem_acquire.lua (which has no waitQueued): the
// first element of the reply.
const (
	waitGranted int64 = 1 // granted by this call
	waitHeld    int64 = 2 // the caller's already, its ttl restarted
	waitQueued  int64 = 3 // not granted; this call queued the entry
	waitWaiting int64 = 0 // not granted; the entry stays queued, or none
	waitSettle  int64 = 4 // dead entries ahead: attempt again at once
)

// refresh.lua, sem_refresh.lua, release.lua and sem_release.lua: what the
// call found of the caller's lease, where they agree. (The semaphore's
// scripts have no leaseTaken: a permit has no other owner.)
const (
	leaseHeld  int64 = 1  // refreshed, or released
	leaseGone  int64 = 0  // the key is gone, or the lease lapsed
	leaseTaken int64 = -1 // another owner holds the lock
)

// release.lua: an operator broke the caller's lease (Break), which the
// mark of the broken grant says.
const leaseBroken int64 = -3

// refresh.lua: refreshed, and the election's leader key does not hold the
// grant (the leader writes it back).
const leaderLost int64 = 2

// release.lua and sem_release.lua (which has no goneServeOn): a release
// that handed the lock or permit on, and one that stopped short at dead
// queue entries ahead of the first live waiter, after the caller's grant
// was released or found gone: the next call goes on.
const (
	releaseHanded   int64 = 2
	releasedServeOn int64 = 3
	goneServeOn     int64 = -2
)

// pttl.lua and sem_pttl.lua (which has no ttlTaken): not a ttl, but the
// caller's lease gone, or the lock another owner's.
const (
	ttlGone  int64 = -2
	ttlTaken int64 = -3
)

// unheld reports whether n, the reply of a refresh or a release, says the
// caller's lease is no longer the caller's: gone, another owner's, or
// broken.
func unheld(n int64) bool { return n == leaseGone || n == leaseTaken || n == leaseBroken }
