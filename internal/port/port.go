// Package port is the one face through which leasekit's engine sends
// commands to Redis and subscribes: a Conn, a Client and a Subscriber,
// sized by what the engine sends and not by what a client library offers.
// GoRedis adapts a go-redis client, the default; an adapter for another
// client implements Conn and speaks these conventions (and Subscription's):
//
//   - A reply is nil, an int64, a string or a []any of replies, as RESP2
//     gives them (a map reply, CONFIG GET's, may also come as a map, as
//     RESP3 gives it: its readers take both); a nil reply comes with the
//     error Nil, and an error reply
//     of the server's with an error that has the method RedisError (the
//     interface ServerError), whose text is the server's own.
//   - A Client that its owner closed fails with ErrClosed, and one whose
//     pool has no connection to give within its timeout with
//     ErrPoolTimeout: the engine tells them from a server's failure.
//   - A command goes to the node that serves its key (KeyPos), or to any
//     node for a command without a key.
//   - An argument that implements encoding.BinaryMarshaler is marshalled
//     every time the command is written to a connection: the engine counts
//     the writes of a release to know that it was sent again.
//
// The errors are go-redis's own values, so that the default adapter wraps
// nothing; go-redis is the library's dependency whichever client runs it.
package port

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client sends the engine's commands. Its methods are safe for concurrent
// use.
type Client interface {
	// Do sends the command args (args[0] its name) and returns its reply.
	Do(ctx context.Context, args ...any) (any, error)
	// Pipe sends cmds in one round trip to the node that serves key (a
	// cluster's master of key's slot; keyless commands among cmds run
	// there too, as WAIT must) and returns their replies in order.
	Pipe(ctx context.Context, key string, cmds ...[]any) []Reply
	// LoadScript loads the Lua script src into the script cache of every
	// master (SCRIPT LOAD).
	LoadScript(ctx context.Context, src string) error
	// Masters returns a Client for each master of a cluster, by its
	// address, and nil for a client that is not a cluster's.
	Masters(ctx context.Context) (map[string]Client, error)
	// RetryWindow is how long after a command's first write the client
	// may write it again, after its reply was lost or its connection
	// broke; 0 where it cannot tell.
	RetryWindow() time.Duration
}

// Memory is what a Client remembers of its server for the engine, between
// calls: a Client that has one (Remembering) saves a failed round trip on
// each call where the server lacks what the engine tries first.
type Memory struct {
	// NoScriptFlags says the server refused to compile a script flagged
	// with a shebang line (Redis before 7.0, miniredis): the engine sends
	// its read-only scripts unflagged from then on.
	NoScriptFlags atomic.Bool
}

// Remembering is a Client that has a Memory: one per Client, for its life.
type Remembering interface {
	Memory() *Memory
}

// Reply is one command's reply in a Pipe. A Pipe that failed as a whole
// (no connection, a handshake refused) has that error in every Reply.
type Reply struct {
	Val any
	Err error
}

// The errors of the conventions (see the package doc).
// Nil is typed error, so that comparing with it boxes nothing.
var (
	Nil            error = redis.Nil
	ErrClosed      error = redis.ErrClosed
	ErrPoolTimeout error = redis.ErrPoolTimeout
)

// ServerError is an error reply of the server's.
type ServerError = redis.Error

// KeyPos is the position in args of the key by which a cluster routes the
// command, or 0 for a command without a key: for EVAL and EVALSHA the
// first key after the count (none when the count is 0), for the keyless
// commands the engine sends (COMMAND, WAIT, PING, TIME, INFO, CONFIG,
// SCRIPT, ACL) none, and for every other command args[1].
func KeyPos(args []any) int {
	if len(args) < 2 {
		return 0
	}
	name, _ := args[0].(string)
	switch {
	case is(name, "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO"):
		if len(args) > 3 && args[2] != 0 && args[2] != "0" {
			return 3
		}
		return 0
	case is(name, "COMMAND", "WAIT", "PING", "TIME", "INFO", "CONFIG", "SCRIPT", "ACL"):
		return 0
	}
	return 1
}

// is reports whether name is one of names, whatever its case; unlike
// strings.ToUpper, it allocates nothing.
func is(name string, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// Int64 is the reply val as an integer, as go-redis's Cmd.Int64 reads it:
// an int64, or a string of one's digits.
func Int64(val any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	switch v := val.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("leasekit: the reply %v (%T) is not an integer", val, val)
}
