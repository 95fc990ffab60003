package main

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// pingTimeout bounds the first contact with Redis, so that an unreachable
// server is reported at once rather than at the first lock operation.
const pingTimeout = 3 * time.Second

// quietRedis discards go-redis's own log lines (a failed dial, once per
// retry): lockrun reports the failure once, in its own words.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// connect returns a client of the Redis in opts once it has answered PING.
func connect(ctx context.Context, opts *redis.Options) (*redis.Client, error) {
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		if e := refused(opts, err); e != nil {
			return nil, e
		}
		return nil, exitf(exitUnavailable, "cannot reach Redis at %s: %w", address(opts), err)
	}
	return client, nil
}

// refused reports an error by which Redis turned lockrun away (a wrong or
// missing password, an ACL user without a command lockrun needs), or returns
// nil. Those are not outages: retrying will not help until the
// configuration changes, so they get their own status. Redis's replies
// (WRONGPASS, NOAUTH, NOPERM) never quote the password.
func refused(opts *redis.Options, err error) error {
	switch {
	case redis.IsAuthError(err):
		return exitf(exitNoPerm, "Redis at %s refused the credentials (the user and password of -redis or $%s): %w", address(opts), redisURLEnv, err)
	case redis.IsPermissionError(err):
		return exitf(exitNoPerm, "Redis at %s refused a command to this user (see the ACL leasekit needs in the README): %w", address(opts), err)
	}
	return nil
}

// address names the Redis in opts for a message: host and port (or socket),
// database and TLS, never the user name or password.
func address(opts *redis.Options) string {
	a := opts.Addr
	if opts.DB != 0 {
		a += " db " + strconv.Itoa(opts.DB)
	}
	if opts.TLSConfig != nil {
		a += " (TLS)"
	}
	return a
}

// unavailable reports a Redis failure after the first PING, or Redis
// turning lockrun away (see refused).
func unavailable(opts *redis.Options, err error) error {
	if e := refused(opts, err); e != nil {
		return e
	}
	return exitf(exitUnavailable, "Redis at %s failed: %w", address(opts), err)
}
