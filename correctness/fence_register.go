package correctness

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Register is a fence kept in Redis: a value per resource that only the
// newest lease holder can overwrite. Each write checks the writer's token
// against the highest token the resource has accepted and stores the value in
// one atomic script: one round trip.
type Register struct {
	client redis.UniversalClient
	prefix string
}

// NewRegister returns a Register over client. Of the options only WithPrefix
// applies (default "leasekit:"); the register of a resource lives at
// <prefix>{resource}:register.
func NewRegister(client redis.UniversalClient, opts ...Option) *Register {
	o := newOptions(opts)
	return &Register{client: client, prefix: o.prefix}
}

// Write stores value for resource if token is at least the highest token the
// resource has accepted, and records token as the highest. An equal token is
// accepted: a token belongs to one grant, so it is the same holder writing
// again. An older token gets a *StaleTokenError (matching ErrStaleToken) and
// changes nothing. Token 0 is ErrInvalidToken; an empty resource name is
// ErrInvalidKey.
func (r *Register) Write(ctx context.Context, resource string, token uint64, value []byte) error {
	if err := lease.CheckName(ErrInvalidKey, resource); err != nil {
		return err
	}
	if token == 0 {
		return fmt.Errorf("%w: 0 is no grant's token", ErrInvalidToken)
	}
	key := lease.RegisterKey(r.prefix, resource)
	reply, err := scripts.RegisterWrite.Run(ctx, r.client, []string{key}, strconv.FormatUint(token, 10), value).Result()
	if err != nil {
		return lease.WrapRedis("register write", key, err)
	}
	switch v := reply.(type) {
	case int64:
		return nil
	case string:
		highest, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("leasekit: register %s holds token %q: %w", lease.Quote(key), v, ErrInvalidToken)
		}
		return &StaleTokenError{Token: token, Highest: highest}
	}
	return fmt.Errorf("leasekit: register write %s: unexpected reply %T", lease.Quote(key), reply)
}

// Read returns the value of resource and the token that wrote it; a resource
// never written has a nil value and token 0. One round trip.
func (r *Register) Read(ctx context.Context, resource string) (value []byte, token uint64, err error) {
	if err := lease.CheckName(ErrInvalidKey, resource); err != nil {
		return nil, 0, err
	}
	key := lease.RegisterKey(r.prefix, resource)
	vals, err := r.client.HMGet(ctx, key, "value", "token").Result()
	if err != nil {
		return nil, 0, lease.WrapRedis("register read", key, err)
	}
	if vals[0] == nil || vals[1] == nil {
		return nil, 0, nil
	}
	v, _ := vals[0].(string)
	t, _ := vals[1].(string)
	token, err = strconv.ParseUint(t, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("leasekit: register %s holds token %q: %w", lease.Quote(key), t, errors.Join(ErrInvalidToken, err))
	}
	return []byte(v), token, nil
}
