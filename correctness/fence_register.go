package correctness

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Register is a fence kept in Redis: a value per resource, the token that
// wrote it, and the highest token that has claimed it. A Write or Claim with
// a token older than the highest that has claimed or written the resource
// is refused, in the same atomic script (one round trip) that would store it.
//
// A holder that reads, computes and writes back reads with Claim, not Read:
// the claim raises the fence at once, so a paused predecessor that read the
// same value cannot write after this holder read it. Write alone fences only
// against holders that have already written.
//
// With the clock floor on (WithClockFloor, default true), a token more than
// an hour ahead of the Redis server's clock in microseconds is refused with
// ErrInvalidToken and changes nothing: no Locker issues such a token, and one
// accepted would lock every honest holder out. So the register's server must
// be the lock's, or keep its time within the hour.
type Register struct {
	conn   port.Client
	prefix string
	check  string // "c": refuse tokens beyond the clock ceiling
	tel    *telemetry.Telemetry
}

// NewRegister returns a Register over client. Of the options only WithPrefix
// (default "leasekit:"), WithClockFloor (the clock ceiling, above) and
// WithMeterProvider (for the count of rejections) apply; the register of a
// resource lives at <prefix>{resource}:register and is never deleted by
// leasekit: it is the fence's memory of the highest token, and a register
// that vanished would accept a superseded holder's write. Delete it yourself
// (DEL) when the resource itself is gone for good. NewRegister panics if
// client is nil.
func NewRegister(client redis.UniversalClient, opts ...Option) *Register {
	if lease.IsNilClient(client) {
		panic("correctness: NewRegister: nil redis client")
	}
	return newRegister(port.GoRedis(client), opts)
}

// NewRegisterConn returns a Register over conn, a client of another library
// than go-redis (see Conn), as NewRegister does over a go-redis client. It
// panics if conn is nil.
func NewRegisterConn(conn Conn, opts ...Option) *Register {
	if conn == nil {
		panic("correctness: NewRegisterConn: nil Conn")
	}
	return newRegister(conn, opts)
}

// newRegister is NewRegister's and NewRegisterConn's Register, on conn.
func newRegister(conn port.Client, opts []Option) *Register {
	o := newOptions(opts)
	o.tel.Kind = "correctness"
	r := &Register{conn: conn, prefix: o.prefix, tel: telemetry.New(o.tel)}
	if o.clockFloor {
		r.check = "c"
	}
	return r
}

// Write stores value for resource if token is at least the highest token
// that has claimed or written the resource, and records token as the writer.
// An equal token is accepted: a token belongs to one grant, so it is the same
// holder writing again. An older token gets a *StaleTokenError (matching
// ErrStaleToken) and changes nothing; so does a token beyond the clock
// ceiling (see Register), with ErrInvalidToken, and so does a register whose
// token or claimed field holds no token (set by hand or by foreign code),
// with ErrInvalidToken naming the key and the field. Token 0 is
// ErrInvalidToken; an empty resource name is ErrInvalidKey.
func (r *Register) Write(ctx context.Context, resource string, token uint64, value []byte) error {
	if err := checkFence(resource, token); err != nil {
		return err
	}
	key := scripts.RegisterKey(r.prefix, resource)
	_, err := r.fence(ctx, registerWrite, "register write of", key, resource, token, value, r.check)
	return r.counted(ctx, err)
}

// Claim raises the fence of resource to token and returns the resource's
// value and the token that wrote it (nil and 0 if none has). From then on a
// Write or Claim with an older token is refused, whether or not this holder
// ever writes. It is refused, changing nothing, as Write is: a
// *StaleTokenError when a newer token has claimed or written the resource,
// ErrInvalidToken for token 0 or a token beyond the clock ceiling,
// ErrInvalidKey for an empty resource name. One round trip.
func (r *Register) Claim(ctx context.Context, resource string, token uint64) (value []byte, writer uint64, err error) {
	if err := checkFence(resource, token); err != nil {
		return nil, 0, err
	}
	key := scripts.RegisterKey(r.prefix, resource)
	got, err := r.fence(ctx, registerClaim, "register claim of", key, resource, token, r.check)
	if err != nil {
		return nil, 0, r.counted(ctx, err)
	}
	return got.Value, got.Writer, nil
}

var (
	registerWrite = lease.NewScript(scripts.RegisterWrite)
	registerClaim = lease.NewScript(scripts.RegisterClaim)
)

// checkFence checks the arguments every fence takes.
func checkFence(resource string, token uint64) error {
	if err := lease.CheckName(ErrInvalidKey, resource); err != nil {
		return err
	}
	if token == 0 {
		return fmt.Errorf("%w: 0 is no grant's token", ErrInvalidToken)
	}
	return nil
}

// ceilingAhead is how far beyond the server clock the clock ceiling lies:
// register_fence.lua's hour, in microseconds.
const ceilingAhead = 3600 * 1_000_000

// fence runs script, register_write or register_claim, for token on the
// register at key, and returns the items of its reply after 'ok' (none for
// a write's 1), or the refusal: a *StaleTokenError, ErrStaleToken for a
// token below the clock floor of a register that keeps no token, an
// *aheadError, or ErrInvalidToken for a register field that holds no token.
func (r *Register) fence(ctx context.Context, script lease.Script, op, key, resource string, token uint64, args ...any) (scripts.Fenced, error) {
	args = append([]any{strconv.FormatUint(token, 10)}, args...)
	reply, err := script.Run(ctx, r.conn, []any{key}, args...)
	if err != nil {
		return scripts.Fenced{}, lease.WrapRedis("correctness", op, resource, lease.KeyErr(key, err))
	}
	f, err := scripts.ReadFence(reply)
	var bad *scripts.BadTokenError
	switch {
	case errors.As(err, &bad):
		return f, fmt.Errorf("%w: fence of %s (key %s) holds token %q", ErrInvalidToken, lease.Quote(resource), lease.Quote(key), bad.Text)
	case err != nil:
		return f, fmt.Errorf("correctness: %s %s: %w", op, lease.Quote(resource), err)
	}
	switch f.Refused {
	case scripts.RefusedCorrupt:
		return f, fmt.Errorf("%w: fence of %s (key %s): field %s holds %q, not a fencing token; repair or delete it",
			ErrInvalidToken, lease.Quote(resource), lease.Quote(key), f.Field, f.Text)
	case scripts.RefusedStale:
		return f, &StaleTokenError{Token: token, Highest: f.Bound}
	case scripts.RefusedFloor:
		return f, fmt.Errorf("%w %d: below %d, the clock floor of %s (key %s), which keeps no token: no request reached it within the retention (see WithProxyRetention), or none ever did",
			ErrStaleToken, token, f.Bound, lease.Quote(resource), lease.Quote(key))
	case scripts.RefusedAhead:
		return f, &aheadError{token: token, clock: f.Bound - min(f.Bound, ceilingAhead)}
	}
	return f, nil
}

// counted counts err in leasekit.fence.rejections if it is a refusal, and
// returns it.
func (r *Register) counted(ctx context.Context, err error) error {
	if reason := rejection(err); reason != "" {
		r.tel.Rejected(ctx, "register", reason)
	}
	return err
}

// Read returns the value of resource and the token that wrote it; a resource
// never written has a nil value and token 0. One round trip. Read does not
// claim: a holder that will write back what it computed from the value uses
// Claim.
func (r *Register) Read(ctx context.Context, resource string) (value []byte, token uint64, err error) {
	if err := lease.CheckName(ErrInvalidKey, resource); err != nil {
		return nil, 0, err
	}
	key := scripts.RegisterKey(r.prefix, resource)
	reply, err := r.conn.Do(ctx, "HMGET", key, "value", "token")
	vals, ok := reply.([]any)
	if err == nil && !ok {
		err = fmt.Errorf("HMGET answered %T, not an array", reply)
	}
	if err != nil {
		return nil, 0, lease.WrapRedis("correctness", "register read of", resource, lease.KeyErr(key, err))
	}
	value, token, err = scripts.ReadRegister(vals)
	var bad *scripts.BadTokenError
	if errors.As(err, &bad) {
		return nil, 0, fmt.Errorf("%w: register of %s (key %s) holds token %q", ErrInvalidToken, lease.Quote(resource), lease.Quote(key), bad.Text)
	}
	return value, token, err
}
