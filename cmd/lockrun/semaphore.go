package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// semaphoreState is what -n N -status reads of a semaphore: its permits'
// ttls and its waiters' waits, never an owner id.
type semaphoreState struct {
	key     string
	limit   string          // "" when no permit is live
	holders []time.Duration // ttls, soonest first
	waiters []time.Duration // time in the queue, longest first
	foreign []string        // keys that hold what leasekit does not write
}

// semaphoreHeld reports whether the name is a semaphore's with permits held,
// its limit and how many: a name -status and -break find no lock of.
func semaphoreHeld(ctx context.Context, client *redis.Client, cfg config) (limit, held int, ok bool) {
	s, err := readSemaphore(ctx, client, scripts.PermitsKey(cfg.prefix, cfg.name))
	if err != nil || len(s.holders) == 0 {
		return 0, 0, false
	}
	limit, err = strconv.Atoi(s.limit)
	return limit, len(s.holders), err == nil
}

// printSemaphoreStatus prints the semaphore's limit, its holders (each
// permit's remaining ttl), how many live waiters queue, and every queue
// entry (how long each has been queued; an entry of a waiter that is gone
// stays until the next release drops it).
// When a key holds what leasekit never writes, it says so and returns an
// error with status 65.
func printSemaphoreStatus(ctx context.Context, client *redis.Client, cfg config, out io.Writer) error {
	s, err := readSemaphore(ctx, client, scripts.PermitsKey(cfg.prefix, cfg.name))
	if err != nil {
		return unavailable(cfg.redis, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "semaphore: %s\nkey: %s\n", cfg.name, s.key)
	switch {
	case s.limit == "":
		fmt.Fprintf(&b, "limit: - (no permit held; -n %d takes effect)\n", cfg.limit)
	case s.limit != strconv.Itoa(cfg.limit):
		fmt.Fprintf(&b, "limit: %s (not this -n %d: a run with it would be refused)\n", s.limit, cfg.limit)
	default:
		fmt.Fprintf(&b, "limit: %s\n", s.limit)
	}
	fmt.Fprintf(&b, "held: %d\n", len(s.holders))
	for _, ttl := range s.holders {
		fmt.Fprintf(&b, "holder: ttl %v\n", ttl.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "waiting: %s\n", liveSemaphoreWaiters(ctx, client, cfg, len(s.waiters)))
	for _, wait := range s.waiters {
		fmt.Fprintf(&b, "waiter: queued %v ago\n", wait.Round(time.Millisecond))
	}
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	if len(s.foreign) > 0 {
		return exitf(exitDataErr, "semaphore %q: %s", cfg.name, strings.Join(s.foreign, "; "))
	}
	return nil
}

// readSemaphore reads the semaphore's keys and the server clock in one
// round trip.
func readSemaphore(ctx context.Context, client *redis.Client, key string) (semaphoreState, error) {
	queueKey := scripts.QueueKey(key)
	pipe := client.Pipeline()
	clock := pipe.Time(ctx)
	permits := pipe.ZRangeWithScores(ctx, key, 0, -1)
	queue := pipe.ZRangeWithScores(ctx, queueKey, 0, -1)
	_, _ = pipe.Exec(ctx)
	if err := clock.Err(); err != nil {
		return semaphoreState{}, fmt.Errorf("reading the server clock: %w", err)
	}
	now := clock.Val()
	s := semaphoreState{key: key}
	header := ""
	for _, r := range []struct {
		key string
		cmd *redis.ZSliceCmd
		add func(z redis.Z)
	}{
		{key, permits, func(z redis.Z) {
			if z.Score < 0 { // the header (scripts/wire.go)
				header, _ = z.Member.(string)
			} else if ttl := time.UnixMilli(int64(z.Score)).Sub(now); ttl > 0 {
				s.holders = append(s.holders, ttl)
			}
		}},
		{queueKey, queue, func(z redis.Z) { s.waiters = append(s.waiters, now.Sub(time.UnixMicro(int64(z.Score)))) }},
	} {
		if err := s.read(r.key, r.cmd, r.add); err != nil {
			return semaphoreState{}, err
		}
	}
	n, parsed := scripts.HeaderLimit(header)
	switch {
	case header != "" && !parsed:
		s.foreign = append(s.foreign, fmt.Sprintf("%s holds %q below 0, not a semaphore's header", lease.Quote(key), header))
	case parsed && len(s.holders) > 0:
		s.limit = strconv.Itoa(n)
	}
	return s, nil
}

// read passes each member of a sorted set read by cmd to add, or notes a key
// of another type.
func (s *semaphoreState) read(key string, cmd *redis.ZSliceCmd, add func(redis.Z)) error {
	switch err := cmd.Err(); {
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		s.foreign = append(s.foreign, lease.Quote(key)+" holds a value of another type, not a sorted set")
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", lease.Quote(key), err)
	}
	for _, z := range cmd.Val() {
		add(z)
	}
	return nil
}

// liveSemaphoreWaiters is how many live waiters queue for the semaphore,
// with the number of queue entries when some are of waiters gone, or, when
// it cannot say (a user who may only read keys), the entries alone.
func liveSemaphoreWaiters(ctx context.Context, client *redis.Client, cfg config, entries int) string {
	l := efficiency.New(client, efficiency.WithPrefix(cfg.prefix))
	defer l.Close()
	info, err := l.Semaphore(cfg.name, max(cfg.limit, 1)).Inspect(ctx)
	switch {
	case err != nil:
		return fmt.Sprintf("%d queued (who of them is alive is unknown)", entries)
	case info.Waiters < entries:
		return fmt.Sprintf("%d (and %d entries of waiters gone)", info.Waiters, entries-info.Waiters)
	}
	return strconv.Itoa(info.Waiters)
}
