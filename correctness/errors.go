package correctness

import (
	"errors"
	"fmt"

	"github.com/leasekit/leasekit/internal/lease"
)

var (
	// ErrNotObtained means the lock was not obtained: another owner holds it
	// (the error then matches ErrTaken too: TryAcquire found it taken), or the
	// context of the call ended first (then the error matches ctx.Err() too,
	// and not ErrTaken). Test for ErrTaken to skip work another worker is
	// doing: an ended context (a shutdown, a deadline) is not that.
	ErrNotObtained = errors.New("correctness: lock not obtained")

	// ErrTaken means another owner holds the lock: a TryAcquire found it taken.
	// It never means the context ended (a wait ends that way, with
	// ErrNotObtained and ctx.Err()), and it matches ErrNotObtained too.
	ErrTaken = lease.NewTaken("correctness: lock taken", ErrNotObtained)

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

	// ErrInvalidKey means a lock or resource name was empty or started
	// with '}'.
	ErrInvalidKey = errors.New("correctness: invalid key")

	// ErrInvalidTTL means a ttl was shorter than one millisecond.
	ErrInvalidTTL = errors.New("correctness: invalid ttl")

	// ErrInvalidToken means a fencing token was 0, which no grant carries, or
	// could not be parsed, or was missing (a request without Fencing-Token, a
	// fenced SQL statement without a TokenArg), or (with the clock floor) was
	// more than an hour ahead of the fence's server clock, which no Locker
	// issues; or that a lock's fence counter key holds something no token
	// can be drawn from (another type, text, the largest 64-bit integer), or
	// a fence's key in Redis (a Register's, the proxy store's) a field that
	// is no token. The error says which.
	ErrInvalidToken = errors.New("correctness: invalid token")

	// ErrStaleToken means a fence refused a write or claim because a newer
	// token had claimed or written the resource: the caller's lease was
	// superseded. Or, at a FencingProxy's store, because the token is below
	// the clock floor of a resource that keeps no token (WithProxyRetention):
	// the caller's lease is older than the retention allows. The caller must
	// stop; retrying with the same token cannot succeed.
	ErrStaleToken = errors.New("correctness: stale fencing token")

	// ErrNotReplicated means WithReplicas was set and fewer replicas than
	// required confirmed the grant in time. The grant was released.
	ErrNotReplicated = errors.New("correctness: grant not replicated")
)

// StaleTokenError is the error of a fence that refused a write or claim:
// Token is the caller's token, Highest the newer one that had claimed or
// written the resource. It matches ErrStaleToken with errors.Is.
type StaleTokenError struct {
	Token   uint64
	Highest uint64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("correctness: stale fencing token %d: %d was accepted before", e.Token, e.Highest)
}

// Is makes errors.Is(err, ErrStaleToken) hold.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// aheadError is a fence's refusal of a token beyond the clock ceiling.
type aheadError struct {
	token, clock uint64 // clock: the server's, in µs
}

func (e *aheadError) Error() string {
	return fmt.Sprintf("%v: token %d is more than an hour ahead of the server clock (%d µs), which no Locker issues (the clock ceiling of WithClockFloor)", ErrInvalidToken, e.token, e.clock)
}

func (e *aheadError) Is(target error) bool { return target == ErrInvalidToken }

// rejection is the reason a fence refused with err, as
// leasekit.fence.rejections counts it: "stale", "ahead", or "" for an error
// that is no refusal.
func rejection(err error) string {
	var ahead *aheadError
	switch {
	case errors.As(err, &ahead):
		return "ahead"
	case errors.Is(err, ErrStaleToken):
		return "stale"
	}
	return ""
}

// nilFunc is the error of op (Do, Hold, Once) given a nil function.
func nilFunc(op string) error { return fmt.Errorf("correctness: %s: fn is nil", op) }
