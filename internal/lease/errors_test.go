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

// TestScriptACLRefusalsReadAsNOPERM holds the replies each server gives when
// an ACL refuses a command, a key or a channel inside a script, recorded
// with redis-cli (EVAL of a script calling SET, GET, PUBLISH as a user
// without that right) on Redis 7.0.15, 8.0.2 and 8.6.3 and Valkey 8.1.1
// and 9.1.2 (Valkey 8 reports redis_version 7.2.4, the release it forked
// from, whose wording it keeps): each reads as NOPERM, and other replies do
// not.
func TestScriptACLRefusalsReadAsNOPERM(t *testing.T) {
	for _, tc := range []struct {
		server, reply string
		acl           bool
	}{
		{"redis 7.0.15", "ERR The user executing the script can't run this command or subcommand script: d223ed8c7345b684e8ed044ed472601f536fa58b, on @user_script:1.", true},
		{"redis 7.0.15 key", "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: eefb072c762647cc8d8a40e7fe048aaf8872d416, on @user_script:1.", true},
		{"redis 7.0.15 channel", "ERR The user executing the script can't publish to the channel mentioned in the command script: f7b756657c6d6f909af0a231dd5d3d1a230fc261, on @user_script:1.", true},
		{"redis 7.0.15 pcall", "ERR The user executing the script can't run this command or subcommand", true},
		{"redis 8.0.2, 8.6.3, valkey 8.1.1", "ERR ACL failure in script: User lim has no permissions to run the 'set' command script: d223ed8c7345b684e8ed044ed472601f536fa58b, on @user_script:1.", true},
		{"redis 8, valkey 8 key", "ERR ACL failure in script: No permissions to access a key script: eefb072c762647cc8d8a40e7fe048aaf8872d416, on @user_script:1.", true},
		{"redis 8, valkey 8 channel", "ERR ACL failure in script: No permissions to access a channel script: f7b756657c6d6f909af0a231dd5d3d1a230fc261, on @user_script:1.", true},
		{"valkey 9.1.2", "ERR ACL failure in script: User lim has no permissions to run the 'set' command script: on @user_script:1.", true},
		{"valkey 9.1.2 key", "ERR ACL failure in script: No permissions to access a key script: on @user_script:1.", true},
		{"outside a script", "NOPERM User lim has no permissions to run the 'set' command", false},
		{"another script error", "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 6d0b...", false},
	} {
		t.Run(tc.server, func(t *testing.T) {
			err := WrapRedis("efficiency", "acquire lock", "job", KeyErr("leasekit:{job}", reply(tc.reply)))
			if got := strings.Contains(err.Error(), ": NOPERM: the ACL user may not run"); got != tc.acl {
				t.Errorf("got %q, want the NOPERM rewrite: %v", err, tc.acl)
			}
			if !errors.Is(err, reply(tc.reply)) {
				t.Errorf("got %q, want it to wrap the reply", err)
			}
		})
	}
}
