package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// reply is an error reply from Redis, as go-redis returns one.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// TestWhichFailuresPass: a waiter rides out the failures that pass (a lost
// connection, a server loading or failing over, a slot on the move) and
// stops on the ones that say the request is wrong; a release retries only
// while the slot moves.
func TestWhichFailuresPass(t *testing.T) {
	for _, tc := range []struct {
		err              error
		transient, moves bool
	}{
		{io.EOF, true, false},
		{reply("LOADING Redis is loading the dataset in memory"), true, false},
		{reply("CLUSTERDOWN The cluster is down"), true, false},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), true, true},
		{reply("MOVED 2888 127.0.0.1:7101"), true, true},
		{reply("ASK 2888 127.0.0.1:7102"), true, true},
		{fmt.Errorf("lock %q: %w", "job", reply("MOVED 2888 127.0.0.1:7101")), true, true},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false, false},
		{reply("NOPERM this user has no permissions to run the 'evalsha' command"), false, false},
		{reply("ERR MOVED is not a command"), false, false},
		{redis.ErrClosed, false, false},
	} {
		if got := transient(tc.err); got != tc.transient {
			t.Errorf("transient(%q) = %v, want %v", tc.err, got, tc.transient)
		}
		if got := slotMoving(tc.err); got != tc.moves {
			t.Errorf("slotMoving(%q) = %v, want %v", tc.err, got, tc.moves)
		}
	}
}

// TestNotObtainedIsOneLine: an acquire that ends for two causes (its
// context's end, and a failure meanwhile) says both on one line, so that a
// log line holds it, and matches each.
func TestNotObtainedIsOneLine(t *testing.T) {
	notObtained := errors.New("not obtained")
	c := New(Config{Kind: "efficiency", Prefix: "p:", Errors: Errors{NotObtained: notObtained}})
	failure := reply("LOADING Redis is loading the dataset in memory")
	err := c.notObtained(c.lockKeys("job"), context.DeadlineExceeded, failure)
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("got %q, want one line", err)
	}
	for _, want := range []error{notObtained, context.DeadlineExceeded, failure} {
		if !errors.Is(err, want) {
			t.Errorf("got %q, want it to match %q", err, want)
		}
	}
	if join(nil, nil) != nil || join(nil, failure) != error(failure) {
		t.Error("join: nil causes are dropped, and one cause is itself")
	}
}
