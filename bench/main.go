// Command bench compares what leasekit's locks cost against redsync and
// bsm/redislock, on one Redis server in one run.
//
//	go run ./bench                        # in-process miniredis: client overhead only
//	go run ./bench -addr 127.0.0.1:6379   # a real server
//	bash scripts/bench.sh                 # a throwaway local redis-server
//
// Scenarios: ping (the round-trip reference), uncontended (acquire + release
// of a free key), convoy-N (N contenders take one key once each, holding it for
// -hold) and keys-parallel (64 goroutines on distinct keys). Every library runs
// interleaved with the others and with a reference made of plain commands, so a
// noisy machine moves them all together, and results are reported as ratios
// to those references.
//
// The table goes to stdout, a progress line to stderr. With -json, stdout gets
// one JSON object per (scenario, library) instead: p50_ns and p99_ns are the
// timed operation's latency (in a convoy, the wait for the acquisition).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// defaultTTL is every library's lease: redsync's default expiry, given to the
// others too. A convoy acquisition gives up after one ttl.
const defaultTTL = 8 * time.Second

type config struct {
	addr, url  string
	hold       time.Duration
	ttl        time.Duration
	n          int
	contenders []int
	libs       []string
	scenarios  []string
	quick      bool
	json       bool
	chart      string
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{ttl: defaultTTL}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", "", "host:port of a Redis server (default: an in-process miniredis)")
	fs.StringVar(&cfg.url, "url", "", "redis://... URL of a Redis server, instead of -addr")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "how long each convoy contender holds the lock")
	fs.IntVar(&cfg.n, "n", 0, "ops per subject in ping and uncontended, and n/600 convoys of each size (1 to 10); keys-parallel runs for a fixed time (default 3000, 40 with -quick)")
	contenders := fs.String("contenders", "8,64", "convoy sizes, comma-separated")
	libs := fs.String("libs", strings.Join(libraryNames(), ","), "libraries to compare, comma-separated")
	scenarios := fs.String("scenarios", strings.Join(scenarioNames, ","), "scenarios to run, comma-separated (convoy-N picks one convoy size)")
	fs.BoolVar(&cfg.quick, "quick", false, "a small, fast run for smoke tests")
	fs.BoolVar(&cfg.json, "json", false, "write one JSON object per (scenario, library) line to stdout instead of the table")
	fs.StringVar(&cfg.chart, "chart", "", "draw the results to `FILE`.png or FILE.svg")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.n == 0 {
		cfg.n = 3000
		if cfg.quick {
			cfg.n = 40
		}
	}
	var err error
	if cfg.contenders, err = parseCounts(*contenders); err != nil {
		return cfg, fmt.Errorf("-contenders: %w", err)
	}
	cfg.libs, cfg.scenarios = splitList(*libs), splitList(*scenarios)
	for _, l := range cfg.libs {
		if !slices.Contains(libraryNames(), l) {
			return cfg, fmt.Errorf("-libs: unknown library %q (want %s)", l, strings.Join(libraryNames(), ","))
		}
	}
	if cfg.chart != "" && !strings.HasSuffix(cfg.chart, ".png") && !strings.HasSuffix(cfg.chart, ".svg") {
		return cfg, fmt.Errorf("-chart: %q is neither .png nor .svg", cfg.chart)
	}
	switch {
	case cfg.n < 1:
		return cfg, fmt.Errorf("-n: %d is not positive", cfg.n)
	case cfg.hold < 0:
		return cfg, fmt.Errorf("-hold: %v is negative", cfg.hold)
	case cfg.addr != "" && cfg.url != "":
		return cfg, errors.New("give -addr or -url, not both")
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// run runs the selected scenarios and writes their results to stdout, the
// configuration and progress to stderr (and the configuration to stdout too
// when it is a table).
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) ([]row, error) {
	scenarios, err := selectScenarios(cfg.scenarios, cfg.contenders)
	if err != nil {
		return nil, err
	}
	client, backend, closeServer, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeServer()
	b := &bench{cfg: cfg, client: client, id: rand.Text()[:8], trips: countTrips(client), prog: newProgress(stderr)}
	if err := b.fillPool(ctx); err != nil {
		return nil, fmt.Errorf("PING %s: %w", backend, err)
	}
	for _, lib := range libraries {
		if slices.Contains(cfg.libs, lib.name) {
			b.libs = append(b.libs, openLib{name: lib.name, l: lib.open(client, cfg.ttl)})
		}
	}
	defer b.closeLibs()
	defer func() {
		n, err := b.cleanup(context.WithoutCancel(ctx))
		if err != nil {
			fmt.Fprintf(stderr, "bench: deleting the keys this run made: %v\n", err)
			return
		}
		fmt.Fprintf(stderr, "bench: deleted the %d keys this run made (bench:%s:*)\n", n, b.id)
	}()

	header := stdout
	if cfg.json {
		header = stderr
	}
	writeHeader(header, cfg, backend, client.Options().PoolSize)
	if len(scenarios) > 0 && scenarios[0].name != "ping" {
		b.measurePing(ctx)
	}
	var rows []row
	for _, s := range scenarios {
		got := s.run(b, ctx)
		b.prog.clear()
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		describe(got, cfg.ttl)
		rows = append(rows, got...)
		if err := writeRows(stdout, cfg.json, s.name, got); err != nil {
			return rows, err
		}
	}
	for _, note := range b.notes {
		fmt.Fprintf(header, "\n%s\n", note)
	}
	if cfg.chart != "" {
		if err := writeChart(cfg.chart, rows); err != nil {
			return rows, fmt.Errorf("-chart: %w", err)
		}
		fmt.Fprintf(stderr, "bench: chart written to %s\n", cfg.chart)
	}
	return rows, nil
}

// connect returns a client of the server cfg names, or of a new in-process
// miniredis, and what it is connected to.
func connect(ctx context.Context, cfg config) (*redis.Client, string, func(), error) {
	var opts *redis.Options
	var mini *miniredis.Miniredis
	switch {
	case cfg.url != "":
		var err error
		if opts, err = redis.ParseURL(cfg.url); err != nil {
			return nil, "", nil, fmt.Errorf("-url: %w", err)
		}
	case cfg.addr != "":
		opts = &redis.Options{Addr: cfg.addr}
	default:
		var err error
		if mini, err = miniredis.Run(); err != nil {
			return nil, "", nil, fmt.Errorf("starting miniredis: %w", err)
		}
		opts = &redis.Options{Addr: mini.Addr()}
	}
	client := redis.NewClient(opts)
	stop := func() {
		_ = client.Close()
		if mini != nil {
			mini.Close()
		}
	}
	if mini != nil {
		return client, fmt.Sprintf("in-process miniredis %s (no flags given): this measures client overhead, not a network round trip; give -addr, or run scripts/bench.sh, for a real server",
			moduleVersion("github.com/alicebob/miniredis/v2")), stop, nil
	}
	return client, "redis-server " + serverVersion(ctx, client) + " at " + opts.Addr, stop, nil
}

func serverVersion(ctx context.Context, client *redis.Client) string {
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return "(version unknown)"
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "(version unknown)"
}

// fillPool opens as many connections as keys-parallel and the largest convoy
// will use, up to the pool's size, so that no scenario pays for dialing.
func (b *bench) fillPool(ctx context.Context) error {
	n := min(slices.Max(append(slices.Clone(b.cfg.contenders), keysParallelWorkers)), b.client.Options().PoolSize)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = b.client.Ping(ctx).Err() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (b *bench) closeLibs() {
	for _, lib := range b.libs {
		_ = lib.l.close()
	}
}

// describe fills in each library row's configuration.
func describe(rows []row, ttl time.Duration) {
	for i := range rows {
		for _, lib := range libraries {
			if rows[i].Lib == lib.name {
				rows[i].Config = lib.describe(ttl)
			}
		}
	}
}
