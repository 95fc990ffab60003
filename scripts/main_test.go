package scripts_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// shortEnd is a reply of release as the tests here compare it: its code,
// or the token of the fenced grant it handed on (an efficiency handoff is
// code 2), or {0, token} as it came when a lapsed lease's release handed
// the lock on. scripts.ReadEnd is the reader the engine uses; these tests
// hold the script to exact replies.
func shortEnd(reply any) any {
	r, _ := reply.([]any)
	if len(r) != 2 {
		return reply
	}
	code, ok1 := r[0].(int64)
	token, ok2 := r[1].(string)
	switch {
	case !ok1 || !ok2:
		return reply
	case token == "":
		return code
	case code == 2 && token == "-":
		return int64(2)
	case code == 2:
		return token
	}
	return reply
}

// shortFenced is a reply of fenced_acquire as the tests here compare it:
// the grant's token, or the holder's ttl (0: its lease lapsed).
func shortFenced(reply any) any {
	r, _ := reply.([]any)
	switch {
	case len(r) == 2 && r[0] == int64(1):
		v, _ := r[1].(string)
		return v[strings.LastIndexByte(v, ':')+1:]
	case len(r) == 4 && r[0] == int64(0):
		return r[1]
	case len(r) == 4 && r[0] == int64(4):
		return int64(0)
	}
	return reply
}

// endResult and fencedResult are cmd's reply, short, and its error.
func endResult(cmd *redis.Cmd) (any, error) { v, err := cmd.Result(); return shortEnd(v), err }

func fencedResult(cmd *redis.Cmd) (any, error) { v, err := cmd.Result(); return shortFenced(v), err }

// endCode is a release's code, as cmd.Int64 read it before the reply was a
// table.
func endCode(cmd *redis.Cmd) (int64, error) {
	v, err := endResult(cmd)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("release replied %v, not a code", v)
	}
	return n, nil
}

// fencedInt and fencedText are a fenced acquire's ttl and token.
func fencedInt(cmd *redis.Cmd) (int64, error) {
	v, err := fencedResult(cmd)
	n, ok := v.(int64)
	if err == nil && !ok {
		err = fmt.Errorf("fenced acquire replied %v, not a ttl", v)
	}
	return n, err
}

func fencedText(cmd *redis.Cmd) (string, error) {
	v, err := fencedResult(cmd)
	s, ok := v.(string)
	if err == nil && !ok {
		err = fmt.Errorf("fenced acquire replied %v, not a token", v)
	}
	return s, err
}
