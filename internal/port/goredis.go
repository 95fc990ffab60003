package port

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// GoRedis returns the Client that sends through the go-redis client c: a
// *redis.Client, a *redis.ClusterClient, a *redis.Ring or a type of one's
// own. It adds nothing to a command but its key's position (KeyPos), so
// that a cluster client routes even a command its COMMAND table lacks.
func GoRedis(c redis.UniversalClient) Client { return goRedis{c} }

type goRedis struct{ c redis.UniversalClient }

// ok is the reply OK, boxed once.
var ok any = "OK"

func (g goRedis) Do(ctx context.Context, args ...any) (any, error) {
	if name, _ := args[0].(string); name == "SET" {
		// A SET answers OK or nil: read as a boolean, its reply boxes
		// nothing, and a nil reply is not an error that go-redis sorts
		// (which allocates) before it returns it.
		cmd := redis.NewBoolCmd(ctx, args...)
		cmd.SetFirstKeyPos(1)
		_ = g.c.Process(ctx, cmd) // its error is cmd's
		switch set, err := cmd.Result(); {
		case err != nil:
			return nil, err
		case !set:
			return nil, Nil
		}
		return ok, nil
	}
	cmd := redis.NewCmd(ctx, args...)
	if pos := KeyPos(args); pos > 0 {
		cmd.SetFirstKeyPos(int8(pos))
	}
	_ = g.c.Process(ctx, cmd) // its error is cmd's
	return cmd.Val(), cmd.Err()
}

func (g goRedis) Pipe(ctx context.Context, key string, cmds ...[]any) []Reply {
	replies := make([]Reply, len(cmds))
	var node redis.Cmdable = g.c
	if cc, ok := g.c.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, key)
		if err != nil {
			for i := range replies {
				replies[i].Err = err
			}
			return replies
		}
		node = master
	}
	pipe := node.Pipeline()
	sent := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		sent[i] = pipe.Do(ctx, args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	for i, cmd := range sent {
		replies[i] = Reply{Val: cmd.Val(), Err: cmd.Err()}
	}
	return replies
}

func (g goRedis) LoadScript(ctx context.Context, src string) error {
	return g.c.ScriptLoad(ctx, src).Err()
}

// RetryWindow: go-redis writes a command again after the read timed out
// (or the connection broke), a pause of at most MaxRetryBackoff, a dial
// and a write: 16 s with go-redis v9.23's defaults. A client with no read
// or write deadline, or of a type of its own, cannot tell.
func (g goRedis) RetryWindow() time.Duration {
	var dial, read, write, pause time.Duration
	switch c := g.c.(type) {
	case *redis.Client:
		o := c.Options()
		dial, read, write, pause = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options()
		dial, read, write, pause = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.Ring:
		o := c.Options()
		dial, read, write, pause = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	default:
		return 0
	}
	if read <= 0 || write <= 0 {
		return 0
	}
	return dial + read + write + max(pause, 0)
}
