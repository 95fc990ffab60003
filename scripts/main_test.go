package scripts_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// shortEnd is a reply of release as the tests here compare it: its code,
// or the token of the fenced grant it handed on (an efficiency handoff is
// code 2), or {0, token} as it came when a lapsed lease's release handed
// the lock on. scripts.ReadEnd is the reader the engine uses; these tests
// hold the script to exact replies.
func shortEnd(reply any) any {
	r, ok := reply.(string)
	if !ok {
		return reply
	}
	code, token, _ := strings.Cut(r, " ")
	n, err := strconv.ParseInt(code, 10, 64)
	switch {
	case err != nil:
		return reply
	case token == "" || n == 2 && token == "-":
		return n
	case n == 2:
		return token
	}
	return []any{n, token}
}

// shortFenced is a reply of fenced_acquire as the tests here compare it:
// the token of the caller's grant, the holder's ttl, or 0 for a lapsed
// lease with waiters queued.
func shortFenced(reply any) any {
	r, ok := reply.(string)
	if !ok {
		return reply
	}
	f := strings.Split(r, " ")
	switch {
	case len(f) >= 2 && f[0] == "1":
		v := strings.Join(f[1:], " ")
		return v[strings.LastIndexByte(v, ':')+1:]
	case len(f) == 4 && f[0] == "0":
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			return n
		}
	case r == "4 0  ":
		return int64(0)
	}
	return reply
}

// table is an attempt's reply (wait, sem_wait, sem_acquire), read by
// scripts.ReadAttempt, as the tests here compare it: {code, value}, or
// {code, ttl, place, now} with the handed grant's token after (now is ""
// when the script did not read the clock).
func table(t *testing.T, reply any) []any {
	t.Helper()
	a, err := scripts.ReadAttempt(reply)
	if err != nil {
		t.Fatalf("attempt: %v", err)
	}
	if a.Granted() {
		return []any{int64(a.Code), a.Value}
	}
	now := ""
	if a.Now != 0 {
		now = strconv.FormatInt(a.Now, 10)
	}
	r := []any{int64(a.Code), a.HolderTTL, a.Place, now}
	if a.Handed != "" {
		r = append(r, a.Handed)
	}
	return r
}

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
