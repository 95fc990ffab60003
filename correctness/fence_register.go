package correctness

import (
	"context"
	"fmt"
	"strconv"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/telemetry"
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
	tel    *telemetry.Telemetry
}

// NewRegister returns a Register over client. Of the options only WithPrefix
// (default "leasekit:") and WithMeterProvider (for the count of rejected
// writes) apply; the register of a resource lives at
// <prefix>{resource}:register and is never deleted by leasekit: it is the
// fence's memory of the highest token, and a register that vanished would
// accept a superseded holder's write. Delete it yourself (DEL) when the
// resource itself is gone for good. NewRegister panics if client is nil.
func NewRegister(client redis.UniversalClient, opts ...Option) *Register {
	if lease.IsNilClient(client) {
		panic("correctness: NewRegister: nil redis client")
	}
	o := newOptions(opts)
	o.tel.Kind = "correctness"
	return &Register{client: client, prefix: o.prefix, tel: telemetry.New(o.tel)}
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
	reply, err := registerWrite.Run(ctx, r.client, []any{key}, strconv.FormatUint(token, 10), value).Result()
	if err != nil {
		return lease.WrapRedis("correctness", "register write of", resource, err)
	}
	switch v := reply.(type) {
	case int64:
		return nil
	case string:
		highest, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: register of %s (key %s) holds token %q", ErrInvalidToken, lease.Quote(resource), lease.Quote(key), v)
		}
		r.tel.Rejected(ctx, "register")
		return &StaleTokenError{Token: token, Highest: highest}
	}
	return fmt.Errorf("correctness: register write of %s: unexpected reply %T", lease.Quote(resource), reply)
}

var registerWrite = lease.NewScript(scripts.RegisterWrite)

// Read returns the value of resource and the token that wrote it; a resource
// never written has a nil value and token 0. One round trip.
func (r *Register) Read(ctx context.Context, resource string) (value []byte, token uint64, err error) {
	if err := lease.CheckName(ErrInvalidKey, resource); err != nil {
		return nil, 0, err
	}
	key := lease.RegisterKey(r.prefix, resource)
	vals, err := r.client.HMGet(ctx, key, "value", "token").Result()
	if err != nil {
		return nil, 0, lease.WrapRedis("correctness", "register read of", resource, err)
	}
	if vals[0] == nil || vals[1] == nil {
		return nil, 0, nil
	}
	v, _ := vals[0].(string)
	t, _ := vals[1].(string)
	token, err = strconv.ParseUint(t, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: register of %s (key %s) holds token %q", ErrInvalidToken, lease.Quote(resource), lease.Quote(key), t)
	}
	return []byte(v), token, nil
}
