package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// mayHaveGranted reports whether an acquire that failed with err may still
// have been granted by Redis: its request may have been sent and its reply
// lost, or, resent by go-redis after a lost reply, been refused after the
// first send landed (OOM, LOADING). Not when the connection could not even be
// made, or the client is closed: then nothing was sent.
func mayHaveGranted(err error) bool {
	var op *net.OpError
	switch {
	case errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// transient reports whether err is a failure that may pass while a waiter
// waits: the connection (a restart, a failover, a network fault), or a server
// that is loading, failing over or busy. Error replies that mean the request
// is wrong (WRONGTYPE, NOPERM, a corrupt key), a closed client and leasekit's
// own errors are not.
func transient(err error) bool {
	if errors.Is(err, redis.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	return hasReply(err, "LOADING ", "MASTERDOWN ", "CLUSTERDOWN ", "READONLY ", "BUSY ") || slotMoving(err)
}

// slotMoving reports whether err says that the lock's Redis Cluster slot is
// moving: TRYAGAIN (its keys are split between two masters mid-migration), or
// a MOVED or ASK that go-redis stopped following after its redirects while
// the nodes disagreed on the slot's owner. The command did not run, and will
// once the slot has settled.
func slotMoving(err error) bool { return hasReply(err, "TRYAGAIN ", "MOVED ", "ASK ") }

// hasReply reports whether err is an error reply from Redis that starts with
// one of prefixes.
func hasReply(err error, prefixes ...string) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range prefixes {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}

// IsServerReply reports whether err is an error reply from Redis (WRONGTYPE,
// NOPERM, OOM, an unknown command) rather than a failure to reach it: the
// command was refused, so it changed nothing.
func IsServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.ErrClosed)
}

// namesLock marks an error that names its lock already, so that the Core
// passes it on unchanged.
func namesLock(err error) error { return named{err} }

type named struct{ error }

func (n named) Unwrap() error { return n.error }

// acquireErr names the lock or semaphore in err, an acquire's failure. An
// error reply the caller can act on matches its sentinel too (kind.refused):
// a corrupt fence counter InvalidToken, a semaphore in use with another
// limit LimitMismatch.
func (c *Core) acquireErr(ctx context.Context, lk *keySet, err error) error {
	var n named
	if errors.As(err, &n) {
		return err
	}
	if e := lk.kind.refused(lk, err); e != nil {
		return e
	}
	return c.redisErr(ctx, "acquire", lk, err)
}

// fenceErr is the error of a script that found a fence counter it cannot
// draw a token from (BADFENCE), matching InvalidToken; nil for any other.
func (c *Core) fenceErr(lk *keySet, err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		if why, ok := scripts.BadFence(re.Error()); ok {
			return fmt.Errorf("%w: %s: %s", c.cfg.Errors.InvalidToken, lk.label(), why)
		}
	}
	return nil
}

// redisErr names the operation, the lock or semaphore and its key in err, a
// failure of Redis or of its reply.
func (c *Core) redisErr(ctx context.Context, op string, lk *keySet, err error) error {
	return WrapRedis(c.cfg.Kind, op+" "+lk.kind.what(), lk.name, KeyErr(lk.kind.keyOf(ctx, lk, err), err))
}

// KeyErr is err, a failure of Redis on key, with the key named.
func KeyErr(key string, err error) error {
	if refused, ok := noScripting(err); ok {
		err = refused
	}
	return fmt.Errorf("key %s: %w", Quote(key), err)
}

// WrapRedis is err of the operation op on the thing called name, in the form
// "kind: op name: err". A command refused by an ACL inside a script comes
// back as a generic ERR (scriptACL); it is marked NOPERM, as Redis marks the
// same refusal outside a script, so that it reads as the permission problem
// it is.
func WrapRedis(kind, op, name string, err error) error {
	if _, ok := noScripting(err); ok {
		return fmt.Errorf("%s: %s %s: the server runs no Lua scripts (scripting is disabled, or its commands "+
			"renamed away), and leasekit's locks need them: %w", kind, op, Quote(name), err)
	}
	if scriptACL(err) {
		return fmt.Errorf("%s: %s %s: NOPERM: the ACL user may not run a command this operation's script needs "+
			"(the README lists the ACL leasekit needs): %w", kind, op, Quote(name), err)
	}
	return fmt.Errorf("%s: %s %s: %w", kind, op, Quote(name), err)
}

// scriptACLWordings are how the servers word an ACL's refusal of a command,
// a key or a channel inside a script, after "ERR ": Redis 7.0 says "The user
// executing the script can't run this command or subcommand" (or "can't
// access at least one of the keys", "can't publish to the channel"); Redis
// 7.2 and later and Valkey say "ACL failure in script: ..." (errors_test.go
// holds the replies recorded on each).
var scriptACLWordings = []string{"The user executing the script can't ", "ACL failure in script: "}

// scriptACL reports whether err is an error reply saying that an ACL refused
// a command, key or channel a script used.
func scriptACL(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := strings.TrimPrefix(re.Error(), "ERR ")
	for _, w := range scriptACLWordings {
		if strings.HasPrefix(msg, w) {
			return true
		}
	}
	return false
}

// noScripting reports whether err is a server's refusal of EVALSHA or EVAL
// as an unknown command (a server built or configured without Lua, or one
// that renamed the commands away), and returns the refusal without the
// arguments the server echoes after it, which hold an owner id.
func noScripting(err error) (error, bool) {
	var re redis.Error
	if !errors.As(err, &re) {
		return nil, false
	}
	msg, _, _ := strings.Cut(re.Error(), ", with args")
	for _, cmd := range []string{"evalsha", "eval"} {
		if strings.EqualFold(msg, "ERR unknown command '"+cmd+"'") {
			return unknownCommand(msg), true
		}
	}
	return nil, false
}

// unknownCommand is a server's "ERR unknown command" reply, cut short: an
// error reply (redis.Error) still.
type unknownCommand string

func (e unknownCommand) Error() string { return string(e) }

// RedisError marks it a reply of the server's (redis.Error).
func (unknownCommand) RedisError() {}

// ReachedRedis reports whether an acquire that failed with err got as far as
// Redis: an error reply, or a reply that did not parse.
func ReachedRedis(err error) bool {
	return !transient(err) && mayHaveGranted(err)
}

// join is errors.Join on one line: the errors of errs that are not nil,
// their messages joined by "; " so that a log line holds the whole error.
// It matches each of them, and is nil when all are.
func join(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return joined(kept)
}

type joined []error

func (j joined) Error() string {
	msgs := make([]string, len(j))
	for i, err := range j {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (j joined) Unwrap() []error { return j }

// NewTaken returns a face's sentinel for a lock held by another owner
// (Errors.Taken): an error with text msg that also matches notObtained, so
// that a caller who tests for "not obtained" (the lock taken, or the
// call's context ended) keeps working, and one who must tell the two apart
// tests for this one.
func NewTaken(msg string, notObtained error) error {
	return &takenError{msg: msg, notObtained: notObtained}
}

type takenError struct {
	msg         string
	notObtained error
}

func (e *takenError) Error() string        { return e.msg }
func (e *takenError) Is(target error) bool { return target == e.notObtained }

// PanicNil panics with a message that names the method op of a nil *typ of
// package pkg, and how to make one.
func PanicNil(pkg, typ, op string) {
	panic(fmt.Sprintf("%s: %s called on a nil *%s: make one with %s.New", pkg, op, typ, pkg))
}
