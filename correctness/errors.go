package correctness

import (
	"errors"
	"fmt"
)

var (
	// ErrNotObtained means the lock is held by another owner: TryAcquire found
	// it taken, or the context of TryAcquire or Acquire ended first (then the
	// error also matches ctx.Err()).
	ErrNotObtained = errors.New("correctness: lock not obtained")

	// ErrLateGrant means Redis granted the lock, but its reply came after the
	// lease's deadline: the ttl is too short for the round trip. The grant
	// was released, so nobody holds it, and the caller must not act as if it
	// did, nor use its token. Acquire gives up with it after three such
	// grants in a row. It is not ErrNotObtained: nobody else holds the lock,
	// and a caller that skips work on ErrNotObtained would skip it every time.
	ErrLateGrant = errors.New("correctness: grant came back after its lease deadline")

	// ErrNotHeld means the caller no longer holds the lock: its lease expired
	// or was deleted, another owner holds it now, or the *Lease is nil.
	ErrNotHeld = errors.New("correctness: lock not held")

	// ErrLockLost means a lease held by Do or Hold was lost while its function
	// ran: a refresh found the key gone or taken, or the lease could not be
	// confirmed before its deadline. It is the cause of the function's
	// context and part of the returned error.
	ErrLockLost = errors.New("correctness: lock lost")

	// ErrClosed means the Locker was closed: every TryAcquire, Acquire and Do
	// after Close fails with it, and so does an Acquire waiting when Close
	// was called. Leases already held can still be refreshed and released.
	ErrClosed = errors.New("correctness: locker closed")

	// ErrInvalidKey means a lock or resource name was empty or started with '}'.
	ErrInvalidKey = errors.New("correctness: invalid key")

	// ErrInvalidTTL means a ttl was shorter than one millisecond.
	ErrInvalidTTL = errors.New("correctness: invalid ttl")

	// ErrInvalidToken means a fencing token was 0, which no grant carries, or
	// could not be parsed; or that a lock's fence counter key holds something
	// no token can be drawn from (another type, text, the largest 64-bit
	// integer), which the error names.
	ErrInvalidToken = errors.New("correctness: invalid token")

	// ErrStaleToken means a fence rejected a write because it had already
	// accepted a newer token: the writer's lease was superseded. The writer
	// must stop; retrying with the same token cannot succeed.
	ErrStaleToken = errors.New("correctness: stale fencing token")

	// ErrNotReplicated means WithReplicas was set and fewer replicas than
	// required confirmed the grant in time. The grant was released.
	ErrNotReplicated = errors.New("correctness: grant not replicated")
)

// StaleTokenError is the error of a fence that rejected a write: Token is the
// writer's token, Highest the newer one the fence had accepted. It matches
// ErrStaleToken with errors.Is.
type StaleTokenError struct {
	Token   uint64
	Highest uint64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("correctness: stale fencing token %d: %d was accepted before", e.Token, e.Highest)
}

// Is makes errors.Is(err, ErrStaleToken) hold.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }
