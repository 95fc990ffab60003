package efficiency

import "errors"

var (
	// ErrNotObtained means the lock is held by another owner: TryObtain found
	// it taken, or Obtain's context ended first (then the error also matches
	// ctx.Err()).
	ErrNotObtained = errors.New("efficiency: lock not obtained")

	// ErrNotHeld means the caller no longer holds the lock: its lease expired,
	// another owner holds it now, or the *Lock is nil.
	ErrNotHeld = errors.New("efficiency: lock not held")

	// ErrLockLost means a lease held by Do or Once was lost while its function
	// ran: a refresh found the key gone or taken, or the lease could not be
	// confirmed before its deadline. It is the cause of the function's context
	// and part of the returned error.
	ErrLockLost = errors.New("efficiency: lock lost")

	// ErrInvalidKey means a lock name was empty or started with '}'.
	ErrInvalidKey = errors.New("efficiency: invalid key")

	// ErrInvalidTTL means a ttl or period was shorter than one millisecond.
	ErrInvalidTTL = errors.New("efficiency: invalid ttl")
)
