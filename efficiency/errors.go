package efficiency

import (
	"errors"
	"fmt"

	"github.com/leasekit/leasekit/internal/lease"
)

var (
	// ErrNotObtained means the lock was not obtained: another owner holds it
	// (the error then matches ErrTaken too: TryObtain found it taken, or a
	// Semaphore's TryAcquire found every permit held), or the context of the
	// call ended first (then the error matches ctx.Err() too, and not
	// ErrTaken). Test for ErrTaken to skip work another worker is doing: an
	// ended context (a shutdown, a deadline) is not that.
	ErrNotObtained = errors.New("efficiency: lock not obtained")

	// ErrTaken means another owner holds the lock: a TryObtain found it taken
	// (or a Semaphore's TryAcquire found every permit held). It never means the
	// context ended (a wait ends that way, with ErrNotObtained and ctx.Err()),
	// and it matches ErrNotObtained too.
	ErrTaken = lease.NewTaken("efficiency: lock taken", ErrNotObtained)

	// ErrLateGrant means Redis granted the lock, but its reply came after the
	// lease's deadline: the ttl is too short for the round trip. The grant
	// was released, so nobody holds it, and the caller must not act as if it
	// did. Obtain gives up with it after three such grants in a row. It is not
	// ErrNotObtained: nobody else holds the lock, and a caller that skips
	// work on ErrNotObtained would skip it every time.
	ErrLateGrant = errors.New("efficiency: grant came back after its lease deadline")

	// ErrNotHeld means the caller no longer holds the lock: its lease expired
	// or was deleted, another owner holds it now, or the *Lock is nil.
	ErrNotHeld = errors.New("efficiency: lock not held")

	// ErrLockLost means a lease held by Do, Hold or Once was lost while its
	// function ran: a refresh found the key gone or taken, or the lease could
	// not be confirmed before its deadline. It is the cause of the function's
	// context and part of the returned error.
	ErrLockLost = errors.New("efficiency: lock lost")

	// ErrClosed means the Locker was closed: every TryObtain, Obtain, Do and
	// Once after Close fails with it (and every acquire of its Semaphores), and
	// so does an Obtain waiting when Close was called. Locks already held can
	// still be refreshed and released.
	ErrClosed = errors.New("efficiency: locker closed")

	// ErrInvalidKey means a lock name was empty or started with '}'.
	ErrInvalidKey = errors.New("efficiency: invalid key")

	// ErrInvalidTTL means a ttl or period was shorter than one millisecond.
	ErrInvalidTTL = errors.New("efficiency: invalid ttl")

	// ErrInvalidLimit means a Semaphore's limit was below 1.
	ErrInvalidLimit = errors.New("efficiency: invalid semaphore limit")

	// ErrLimitMismatch means a Semaphore's acquire found permits of the
	// semaphore live under another limit; the error names both. Every
	// process must use one limit for a name while its permits are live.
	ErrLimitMismatch = errors.New("efficiency: semaphore limit mismatch")
)

// nilFunc is the error of op (Do, Hold, Once) given a nil function.
func nilFunc(op string) error { return fmt.Errorf("efficiency: %s: fn is nil", op) }
