package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/redis/go-redis/v9"
)

// redisURLEnv names the environment variable that holds the default -redis.
const redisURLEnv = "LEASEKIT_REDIS_URL"

const defaultRedisURL = "redis://127.0.0.1:6379"

const usageLine = `usage: lockrun [flags] NAME -- COMMAND [ARGS...]
       lockrun [-redis URL] [-prefix P] [-fenced | -n N] -status NAME
       lockrun [-redis URL] [-prefix P] [-fenced] -break NAME`

// config is what the command line asks for.
type config struct {
	redis   *redis.Options
	prefix  string
	ttl     time.Duration
	wait    time.Duration
	once    time.Duration
	grace   time.Duration
	fenced  bool
	limit   int      // -n: hold one of limit permits of a semaphore; 0 for a lock
	audit   bool     // with -fenced: run the correctness audit and log its warnings
	quiet   bool     // say nothing when the run is skipped (exit 75)
	name    string   // the lock's name (or -status's)
	status  bool     // print the lock's state instead of running a command
	ttlSet  bool     // -ttl was given (-status: the runs' ttl)
	breaks  bool     // break the lock's lease instead of running a command
	command []string // argv of the command to run
}

// errUsage marks a command line lockrun cannot run.
var errUsage = errors.New("usage")

// minTTL is the shortest lease Redis can hold (PX takes milliseconds).
const minTTL = time.Millisecond

func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
}

// parseArgs reads the command line. It returns flag.ErrHelp for -h, after
// printing the usage and the flags to stderr, and an error matching errUsage
// for anything else it cannot run.
func parseArgs(args, env []string, stderr io.Writer) (config, error) {
	var c config
	var redisURL, status, breakName string
	fs := flag.NewFlagSet("lockrun", flag.ContinueOnError)
	// The flag package would print the error and the usage itself; run
	// prints both once, as for every other usage error.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// The default URL is resolved after parsing, so that -h never prints a
	// password taken from the environment.
	fs.StringVar(&redisURL, "redis", "", "Redis `URL` (default $"+redisURLEnv+", else "+defaultRedisURL+")")
	fs.StringVar(&c.prefix, "prefix", lease.DefaultPrefix, "key prefix `P`; the lock is P{NAME}")
	fs.DurationVar(&c.ttl, "ttl", 30*time.Second, "lease length, refreshed every ttl/3 while the command runs")
	fs.DurationVar(&c.wait, "wait", 0, "how long to wait for the lock; 0 tries once")
	fs.BoolVar(&c.fenced, "fenced", false, "take a correctness lease and pass its fencing token as LEASEKIT_TOKEN")
	fs.IntVar(&c.limit, "n", 0, "run while holding one of `N` permits of the semaphore NAME, rather than the lock NAME")
	fs.DurationVar(&c.once, "once", 0, "run at most once per `PERIOD` per NAME across all machines")
	fs.DurationVar(&c.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when stopping the command's processes (the lease was lost, or the command left them behind)")
	fs.StringVar(&status, "status", "", "print the state of the lock called `NAME` and exit")
	fs.StringVar(&breakName, "break", "", "end the lease on the lock called `NAME` at once, whoever holds it, and exit: its first live waiter gets it (its holder may still be running: break only one known to be dead)")
	fs.BoolVar(&c.quiet, "quiet", false, "print nothing when the lock is held or the period already ran (exit 75)")
	fs.BoolVar(&c.audit, "audit", true, "with -fenced, warn on stderr about Redis settings that weaken fencing")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, usageLine)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return c, err
		}
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if redisURL == "" {
		redisURL = lookupEnv(env, redisURLEnv)
	}
	if redisURL == "" {
		redisURL = defaultRedisURL
	}
	opts, err := parseRedisURL(redisURL)
	if err != nil {
		return c, err
	}
	c.redis = opts

	if err := c.checkLimit(set); err != nil {
		return c, err
	}
	switch {
	case set["status"] && set["break"]:
		return c, usagef("-status and -break cannot be combined: run one, then the other")
	case set["break"] && set["n"]:
		return c, usagef("-break cannot be combined with -n: a semaphore has no single holder to break; a permit whose holder died returns at its ttl")
	case set["status"], set["break"]:
		c.name, c.status, c.breaks, c.ttlSet = status, set["status"], set["break"], set["ttl"]
		if c.ttlSet && c.ttl < minTTL {
			return c, usagef("-ttl %v is shorter than %v", c.ttl, minTTL)
		}
		flag := "-status"
		if c.breaks {
			c.name, flag = breakName, "-break"
		}
		if fs.NArg() > 0 {
			return c, usagef("%s takes no command; got %q after its NAME", flag, fs.Arg(0))
		}
		return c, checkName(c.name)
	}
	if err := c.checkFlags(set); err != nil {
		return c, err
	}
	if c.name, c.command, err = splitCommand(fs.Args(), endedFlags(args, fs.NArg())); err != nil {
		return c, err
	}
	return c, checkName(c.name)
}

// checkLimit refuses an -n that no semaphore can have, and the flags that
// cannot go with a semaphore.
func (c *config) checkLimit(set map[string]bool) error {
	switch {
	case !set["n"]:
		return nil
	case c.limit < 1:
		return usagef("-n %d: a semaphore has at least 1 permit", c.limit)
	case c.fenced:
		return usagef("-n cannot be combined with -fenced: a semaphore's N holders cannot be fenced by one newest-token rule, so its permits carry no token")
	case set["once"]:
		return usagef("-once cannot be combined with -n: -once keeps a lock for the whole period so that one run happens per period; it has no permits to share")
	}
	return nil
}

// checkFlags refuses values and combinations that cannot mean what the
// user wants, rather than ignoring one of them.
func (c *config) checkFlags(set map[string]bool) error {
	switch {
	case c.ttl < minTTL:
		return usagef("-ttl %v is shorter than %v", c.ttl, minTTL)
	case c.wait < 0:
		return usagef("-wait %v is negative", c.wait)
	case c.grace < 0:
		return usagef("-grace %v is negative", c.grace)
	case set["audit"] && !c.fenced:
		return usagef("-audit applies only with -fenced: an efficiency lock has no audit")
	case !set["once"]:
		return nil
	case c.once < minTTL:
		return usagef("-once %v is shorter than %v", c.once, minTTL)
	case c.fenced:
		return usagef("-once cannot be combined with -fenced: a -once run keeps its lock after it ends, and a fencing token for it would guard nothing")
	case set["wait"]:
		return usagef("-once cannot be combined with -wait: a run that finds the period taken skips it")
	case set["ttl"]:
		return usagef("-once cannot be combined with -ttl: the lease lasts the period, and is kept alive while the command runs past it")
	}
	return nil
}

// splitCommand splits NAME -- COMMAND [ARGS...]. dashed says that a --
// ended the flags just before args: in lockrun -wait 5s -- true, the flags
// take that --, and true would pass for NAME.
func splitCommand(args []string, dashed bool) (name string, command []string, err error) {
	switch {
	case len(args) >= 2 && args[1] == "--":
		if len(args) == 2 {
			return "", nil, usagef("missing COMMAND after --")
		}
		return args[0], args[2:], nil
	case dashed:
		return "", nil, usagef("missing NAME before --")
	case len(args) == 0:
		return "", nil, usagef("missing NAME")
	case len(args) == 1:
		return "", nil, usagef("missing -- COMMAND after NAME %s", lease.Quote(args[0]))
	case strings.HasPrefix(args[1], "-"):
		return "", nil, usagef("flags go before NAME, and -- after it; got %q after NAME", args[1])
	}
	return "", nil, usagef("missing -- after NAME %s", lease.Quote(args[0]))
}

// endedFlags reports whether the flag parser took a -- that ended the flags
// in args, leaving rest arguments after it.
func endedFlags(args []string, rest int) bool {
	i := len(args) - rest - 1
	return i >= 0 && args[i] == "--"
}

var errBadName = errors.New("invalid lock name")

func checkName(name string) error {
	if err := lease.CheckName(errBadName, name); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// parseRedisURL parses -redis without ever echoing the URL, which may hold a
// password: url.Parse's errors quote their input in full.
func parseRedisURL(raw string) (*redis.Options, error) {
	opts, err := redis.ParseURL(raw)
	if err == nil {
		return opts, nil
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return nil, usagef("-redis: not a Redis URL (redis://[user:password@]host[:port][/db], rediss://..., unix:///path): %w", err)
}

// lookupEnv returns the value of key in env, the first one if it repeats, as
// os.Getenv does.
func lookupEnv(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}
