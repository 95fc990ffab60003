// Command bench compares what leasekit's locks cost against redsync,
// bsm/redislock and rueidislock, on one Redis server (or cluster) in one run,
// in one process and across many.
//
//	go run ./bench                        # in-process miniredis: client overhead only
//	go run ./bench -addr 127.0.0.1:6379   # a real server
//	bash .ci/bench.sh                     # a throwaway local redis-server
//	bash .ci/bench.sh -cluster            # a throwaway 3-master cluster
//	go run ./bench -addr ... -etcd a,b,c  # and the etcd subjects
//
// Scenarios: ping (the round-trip references), uncontended (acquire + release
// of a free key), convoy-N (N goroutines take one key once each, holding it
// for -hold), convoy-procs (P processes of C contenders each, the bench
// re-executed as workers, on one key) and keys-parallel (64 goroutines on
// distinct keys). With -etcd (default: $LEASEKIT_ETCD_ENDPOINTS), the ping
// scenario adds an etcd Put, and uncontended and the convoys add leasekit's
// correctness lock with its tokens drawn from etcd and etcd's own
// concurrency.Mutex. Every library runs interleaved with the others and with a
// reference made of plain commands, so a noisy machine moves them all
// together; results are ratios to those references, and costs that noise
// cannot move much: client CPU per op (getrusage), server time and commands
// per op (INFO commandstats).
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
)

// defaultTTL is every library's lease: redsync's default expiry, given to the
// others too. A convoy acquisition gives up after one ttl.
const defaultTTL = 8 * time.Second

type config struct {
	addr, url  string
	cluster    []string
	hold       time.Duration
	ttl        time.Duration
	n          int
	contenders []int
	procs      []int
	perProc    int
	stagger    time.Duration // convoy-procs: between arrivals; procStagger unless a test sets it
	spin       int
	rtt        time.Duration // added to every round trip by a proxy (target.go); 0: none
	libs       []string
	scenarios  []string
	quick      bool
	json       bool
	chart      string

	// etcd are the client endpoints of the etcd cluster of the etcd
	// subjects; none without -etcd.
	etcd []string
	// etcdSkipped says the etcd subjects were left out of the default
	// -libs, for want of -etcd.
	etcdSkipped bool
}

func main() {
	if role, ok := os.LookupEnv(roleEnv); ok {
		os.Exit(runRole(role))
	}
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
	cluster := fs.String("cluster", "", "comma-separated host:port seed nodes of a Redis Cluster, instead of -addr")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "how long each convoy contender holds the lock")
	fs.IntVar(&cfg.n, "n", 0, "ops per subject in ping and uncontended, and n/600 convoys of each size (1 to 10); keys-parallel runs for a fixed time (default 3000, 40 with -quick)")
	contenders := fs.String("contenders", "8,64", "convoy sizes, comma-separated")
	procs := fs.String("procs", "1,4,16", "convoy-procs: numbers of worker processes, comma-separated")
	fs.IntVar(&cfg.perProc, "per-proc", 4, "convoy-procs: contenders in each worker process")
	fs.DurationVar(&cfg.rtt, "rtt", 0, "add `D` to every round trip: the clients reach the server through a proxy in this process that holds each reply D, as a network would (with -addr, or the in-process miniredis)")
	fs.IntVar(&cfg.spin, "spin", 0, "keep `N` low-priority (nice 19) spinner processes running, so that idle vCPUs do not halt between round trips (steadier latency on a VM)")
	libs := fs.String("libs", strings.Join(libraryNames(), ","), "libraries to compare, comma-separated (correctness-etcd and etcd-mutex need -etcd)")
	etcd := fs.String("etcd", os.Getenv(etcdEndpointsEnv), "comma-separated host:port client `ENDPOINTS` of an etcd cluster: adds an etcd Put to ping, and leasekit correctness with etcd tokens and etcd's concurrency.Mutex to uncontended and the convoys (default $"+etcdEndpointsEnv+")")
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
	if cfg.procs, err = parseCounts(*procs); err != nil {
		return cfg, fmt.Errorf("-procs: %w", err)
	}
	cfg.libs, cfg.scenarios, cfg.cluster = splitList(*libs), splitList(*scenarios), splitList(*cluster)
	cfg.etcd = splitList(*etcd)
	libsSet := false
	fs.Visit(func(f *flag.Flag) { libsSet = libsSet || f.Name == "libs" })
	if len(cfg.etcd) == 0 && !libsSet {
		cfg.libs = slices.DeleteFunc(cfg.libs, needsEtcd)
		cfg.etcdSkipped = true
	}
	return cfg, cfg.check()
}

// check says what is wrong with the flags' values, if anything.
func (cfg config) check() error {
	for _, l := range cfg.libs {
		if !slices.Contains(libraryNames(), l) {
			return fmt.Errorf("-libs: unknown library %q (want %s)", l, strings.Join(libraryNames(), ","))
		}
		if needsEtcd(l) && len(cfg.etcd) == 0 {
			return fmt.Errorf("-libs: %s %v", l, errNoEtcd)
		}
	}
	switch {
	case cfg.chart != "" && !strings.HasSuffix(cfg.chart, ".png") && !strings.HasSuffix(cfg.chart, ".svg"):
		return fmt.Errorf("-chart: %q is neither .png nor .svg", cfg.chart)
	case cfg.n < 1:
		return fmt.Errorf("-n: %d is not positive", cfg.n)
	case cfg.hold < 0:
		return fmt.Errorf("-hold: %v is negative", cfg.hold)
	case cfg.perProc < 1:
		return fmt.Errorf("-per-proc: %d is not positive", cfg.perProc)
	case cfg.spin < 0:
		return fmt.Errorf("-spin: %d is negative", cfg.spin)
	case cfg.rtt < 0:
		return fmt.Errorf("-rtt: %v is negative", cfg.rtt)
	case cfg.rtt > 0 && (cfg.url != "" || len(cfg.cluster) > 0):
		return errors.New("-rtt needs -addr (or the in-process miniredis): a URL's or a cluster's clients would not all go through the proxy")
	case cfg.rtt > 0 && len(cfg.etcd) > 0:
		return errors.New("-rtt delays Redis's round trips, not etcd's: give -etcd= (empty) to run without etcd")
	case btoi(cfg.addr != "")+btoi(cfg.url != "")+btoi(len(cfg.cluster) > 0) > 1:
		return errors.New("give one of -addr, -url and -cluster")
	}
	return nil
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
	if cfg.etcdSkipped && slices.ContainsFunc(scenarios, func(s scenario) bool { return hasEtcdRows(s.name) }) {
		fmt.Fprintln(stderr, "bench: no etcd rows (correctness-etcd, etcd-mutex, the etcd Put reference): give -etcd host:port,... (or "+etcdEndpointsEnv+"), or run bash .ci/bench.sh, which starts an etcd cluster")
	}
	t, err := dial(cfg)
	if err != nil {
		return nil, err
	}
	defer t.close()
	b := &bench{cfg: cfg, target: t, client: t.client, id: rand.Text()[:8], prog: newProgress(stderr)}
	if err := b.fillPool(ctx); err != nil {
		return nil, fmt.Errorf("PING %s: %w", t.where(), err)
	}
	defer b.cleanup(context.WithoutCancel(ctx), stderr)
	if err := b.openLibs(); err != nil {
		return nil, err
	}
	defer b.closeLibs()
	b.spin = &spinners{n: cfg.spin}
	defer b.spin.stop()

	header := stdout
	if cfg.json {
		header = stderr
	}
	writeHeader(header, cfg, t.describe(ctx), t.poolSize(), t)
	if err := b.spin.start(); err != nil {
		return nil, fmt.Errorf("-spin: %w", err)
	}
	rows, err := b.runScenarios(ctx, scenarios, stdout)
	if err != nil {
		return rows, err
	}
	for _, note := range b.notes {
		fmt.Fprintf(header, "\n%s\n", note)
	}
	if !cfg.json {
		writeSummary(stdout, rows)
	}
	if cfg.chart != "" {
		if err := writeChart(cfg.chart, rows); err != nil {
			return rows, fmt.Errorf("-chart: %w", err)
		}
		fmt.Fprintf(stderr, "bench: chart written to %s\n", cfg.chart)
	}
	return rows, nil
}

// runScenarios runs scenarios in turn, after the PING references, and
// writes each one's rows as it ends.
func (b *bench) runScenarios(ctx context.Context, scenarios []scenario, stdout io.Writer) ([]row, error) {
	if len(scenarios) > 0 && scenarios[0].name != "ping" {
		b.measurePing(ctx)
	}
	var rows []row
	for _, s := range scenarios {
		if s.name != "ping" && s.name != "uncontended" {
			b.spin.stop() // only for the latency scenarios: see spinners
		}
		got := s.run(b, ctx)
		b.prog.clear()
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		describe(got, b.cfg.ttl, b.target)
		rows = append(rows, got...)
		if err := writeRows(stdout, b.cfg.json, s.name, got); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// cleanup deletes every key the run made, in Redis and in etcd, and says so
// on stderr.
func (b *bench) cleanup(ctx context.Context, stderr io.Writer) {
	if e := b.target.etcd; e != nil {
		n, err := e.cleanup(ctx, b.id)
		if err != nil {
			fmt.Fprintf(stderr, "bench: deleting the etcd keys this run made: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "bench: deleted the %d etcd keys this run made (%s*)\n", n, strings.Join(etcdPrefixes(b.id), "*, "))
		}
	}
	n, err := b.target.cleanup(ctx, b.id)
	if err != nil {
		fmt.Fprintf(stderr, "bench: deleting the keys this run made: %v\n", err)
		return
	}
	fmt.Fprintf(stderr, "bench: deleted the %d keys this run made (bench:%s:*)\n", n, b.id)
}

// openLibs opens every library that -libs names, in the order they run.
func (b *bench) openLibs() error {
	for _, lib := range libraries {
		if !slices.Contains(b.cfg.libs, lib.name) {
			continue
		}
		l, err := lib.open(b.target, b.client, b.cfg.ttl)
		if err != nil {
			b.closeLibs()
			return err
		}
		b.libs = append(b.libs, openLib{name: lib.name, lib: lib, l: l})
	}
	return nil
}

// fillPool opens as many connections as keys-parallel and the largest convoy
// will use, up to the pool's size, so that no scenario pays for dialing.
func (b *bench) fillPool(ctx context.Context) error {
	n := min(slices.Max(append(slices.Clone(b.cfg.contenders), keysParallelWorkers)), b.target.poolSize())
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

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// describe fills in each library row's configuration.
func describe(rows []row, ttl time.Duration, t *target) {
	for i := range rows {
		if lib, ok := libraryNamed(rows[i].Lib); ok {
			rows[i].Config = lib.describe(ttl, t)
		}
	}
}
