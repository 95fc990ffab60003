package redistest

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"
)

// Fault is a go-redis hook that lets a test spoil the reply of chosen
// commands after Redis has run them: the command takes effect, the caller sees
// Err (a lost reply), or sees the reply only after After runs (a late one).
type Fault struct {
	// Match picks the commands to spoil, by operation name as Counter names
	// them ("acquire", "fenced_acquire", "release", ...).
	Match func(op string) bool
	// Err, when set, replaces the reply of a matched command.
	Err error
	// After, when set, runs before a matched command's reply is returned.
	After func()
	// Drop, with Err, fails a matched command without sending it: Redis
	// never sees it.
	Drop bool
}

// Inject installs f on client.
func Inject(client *redis.Client, f *Fault) { client.AddHook(f) }

// DialHook passes dials through.
func (f *Fault) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook spoils matched commands.
func (f *Fault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		matched := f.Match(opName(cmd)) // once per command: Match may count
		if matched && f.Drop && f.Err != nil {
			cmd.SetErr(f.Err)
			return f.Err
		}
		err := next(ctx, cmd)
		if matched {
			err = f.spoil(err)
			if f.Err != nil {
				cmd.SetErr(f.Err)
			}
		}
		return err
	}
}

// ProcessPipelineHook spoils pipelines whose first command matches.
func (f *Fault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		matched := len(cmds) > 0 && f.Match(opName(cmds[0]))
		if matched && f.Drop && f.Err != nil {
			for _, c := range cmds {
				c.SetErr(f.Err)
			}
			return f.Err
		}
		err := next(ctx, cmds)
		if matched {
			err = f.spoil(err)
			if f.Err != nil {
				for _, c := range cmds {
					c.SetErr(f.Err)
				}
			}
		}
		return err
	}
}

func (f *Fault) spoil(err error) error {
	if f.After != nil {
		f.After()
	}
	if f.Err != nil {
		return f.Err
	}
	return err
}
