package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

func writeHeader(w io.Writer, cfg config, backend string, pool int, t *target) {
	fmt.Fprintf(w, "leasekit bench on %s\n", backend)
	fmt.Fprintf(w, "%s, GOMAXPROCS %d, %d CPUs, go-redis %s: one client (pool %d) shared by every library and reference in this process\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), moduleVersion("github.com/redis/go-redis/v9"), pool)
	fmt.Fprintf(w, "ttl %v for every library; convoy hold %v, a convoy acquisition gives up after one ttl\n", cfg.ttl, cfg.hold)
	if cfg.rtt > 0 {
		fmt.Fprintf(w, "-rtt %v: every client reached the server through a proxy in the bench process that held each reply %v (a pub/sub message too), as a network would\n", cfg.rtt, cfg.rtt)
	}
	if cfg.spin > 0 {
		fmt.Fprintf(w, "-spin %d: %d spinner processes at nice 19 ran during ping and uncontended, so that idle vCPUs did not halt between round trips\n", cfg.spin, cfg.spin)
	} else {
		fmt.Fprintln(w, "no spinners: on a VM, idle vCPUs may halt between round trips, and latency then measures wake-ups (see -spin)")
	}
	if t.etcd != nil {
		fmt.Fprintf(w, "etcd: %s\n", t.etcd.desc)
	}
	fmt.Fprintln(w)
	for _, lib := range libraries {
		if slices.Contains(cfg.libs, lib.name) {
			fmt.Fprintf(w, "  %-12s %s\n", lib.name, lib.describe(cfg.ttl, t))
		}
	}
	writeHowToRead(w, cfg, t)
}

// writeHowToRead explains the tables.
func writeHowToRead(w io.Writer, cfg config, t *target) {
	cell := keysParallelCell
	if cfg.quick {
		cell = keysParallelQuickCell
	}
	fmt.Fprintf(w, howToRead, chunk, chunk, cell)
	if t.mini != nil {
		fmt.Fprint(w, ", and here miniredis itself")
	}
	fmt.Fprint(w, howToReadOn)
	if t.etcd != nil {
		fmt.Fprint(w, howToReadEtcd)
	}
}

// howToRead is the header's explanation of the tables, up to where it says
// what cpu/op includes (the ops of a chunk, twice, and keys-parallel's cell);
// howToReadOn the rest of it.
const howToRead = `
How to read it:
  - Each scenario interleaves its subjects (A, B, C, A, B, C, ...): %d ops of one,
    then %d of the next; a whole convoy; %v of keys-parallel. Every subject
    gets the same untimed warm-up first. uncontended and the convoys use each
    library's waiting acquire. leasekit's first tries like a TryObtain; only a
    held lock makes it subscribe to its Locker's grant channel and queue, and
    the holder's release then hands the lock straight to the first in line.
  - Costs, in an untimed pass of their own: allocs/op counts every allocation
    in the process while the op runs (runtime.MemStats); cpu/op is this
    process's CPU time (getrusage), the library, go-redis and leasekit's
    subscription reader included`

const howToReadOn = `; srv µs/op and srv cmds/op come
    from INFO commandstats: the server time of the commands the clients sent
    (a script's inner commands inside its own time, counted once) and every
    command run, script-internal ones included.
  - trips/op counts round trips through the client (a pub/sub SUBSCRIBE is not one).
  - convoy: makespan against the ideal N × (measured hold + one PING); handoff is
    from the holder calling release to the next holder's acquire returning, in
    PINGs, in PINGs made after the same idle time as a holder's (a round trip
    that starts from idle is what a handoff starts with), and in PUBLISHes made
    after that idle time and received by a subscriber in this process (the
    floor of a handoff announced over pub/sub).
  - convoy-procs: P worker processes (this binary re-executed), each with its
    own client and library instance, C contenders each, one key. The parent
    holds the lock while the contenders arrive one at a time, 2 ms apart,
    interleaved across processes; then releases it, and the convoy drains.
    makespan runs from that release to the last release; srv µs and cmds per
    acquisition as above, waiting included. Each convoy runs twice in turn:
    with warm workers (an untimed acquire and a waiter on the key first) and
    with cold ones, as fresh processes (cron jobs) meet the lock: no hold by
    the parent, every contender arriving at once at "go", each worker making
    its library's instance (its client, if that dials as it is made) after
    it; the makespan runs from "go", dials included. ÷ warm is the cold
    makespan over the warm one; made p50 is when a cold worker had made its
    library's instance (a rueidis client dials as it is made), from "go".
  - convoy-procs first acquire (leasekit): the phases of each worker's first
    acquisition, p50 start–end in µs from its arrival, stamped by its client's
    hooks: dial (the first command's call to its write), first attempt,
    subscribe (the subscription connection's dial to the server confirming
    SUBSCRIBE), queue (the attempt that queues); queued ÷ PING is when it
    was in line; its handoff is the one that granted it.
  - convoy-procs order, from as many untimed ordering runs with a MONITOR
    connection on every node (absent on miniredis, which has none): out of
    order counts grants made while a contender whose first command the
    server ran earlier was still waiting; out of queue, for leasekit, grants
    made while one the server had queued earlier was (both "k/n": k of the
    n grants placed; FIFO: 0).
`

// howToReadEtcd is the header's explanation of the etcd subjects, with
// -etcd.
const howToReadEtcd = `  - etcd: correctness-etcd is the correctness lock with its fencing tokens
    drawn from etcd (etcdtokens): its grant is made in Redis as correctness's,
    then one etcd Txn draws the token and one more Redis round trip stamps
    it into the grant, before Acquire returns. etcd-mutex is etcd's own
    concurrency.Mutex on the same cluster, its token the revision of the
    response that granted it, and no Redis. They run in uncontended and the
    convoys of this process. ÷ etcd Put is against the p50 of a plain etcd
    Put, one etcd round trip (one Raft commit, a WAL fsync on each member):
    in uncontended its own etcd Put reference, interleaved with the
    subjects, since etcd's latency drifts with its disk's; in the convoys
    the ping scenario's. etcd trips count the etcd client's unary RPCs (a
    watch, or a lease keep-alive, on a stream, is not one), and a convoy's
    etcd trip p50 is what they took there (correctness-etcd's: the draws in
    its handoffs); trips and srv columns are Redis's: etcd's own server
    time is not measured.
  - tokens: every grant's fencing token (correctness, correctness-etcd,
    etcd-mutex) is checked to be above the previous grant's of the same
    lock; a note after the tables says if one was not.
`

// row is one (scenario, subject) result. p50/p99 are the timed operation's
// latency; in a convoy, the wait for the acquisition.
type row struct {
	Scenario     string   `json:"scenario"`
	Lib          string   `json:"lib"`
	Reference    bool     `json:"reference,omitempty"`
	Config       string   `json:"config,omitempty"`
	N            int      `json:"n"`
	P50          int64    `json:"p50_ns"`
	P99          int64    `json:"p99_ns"`
	OpsPerS      float64  `json:"ops_per_s"`
	AllocsPerOp  *float64 `json:"allocs_per_op,omitempty"`
	TripsPerOp   float64  `json:"round_trips_per_op"`
	Ratio        float64  `json:"ratio,omitempty"`
	RatioTo      string   `json:"ratio_to,omitempty"`
	IdealNs      int64    `json:"ideal_ns,omitempty"`
	Makespan     int64    `json:"makespan_ns,omitempty"`
	HoldNs       int64    `json:"hold_ns,omitempty"`
	HandoffP50   int64    `json:"handoff_p50_ns,omitempty"`
	HandoffP99   int64    `json:"handoff_p99_ns,omitempty"`
	HandoffPings float64  `json:"handoff_p50_pings,omitempty"`
	// HandoffIdlePings is the handoff p50 in PINGs made from idle.
	HandoffIdlePings float64 `json:"handoff_p50_idle_pings,omitempty"`
	// HandoffPublishes is the handoff p50 in PUBLISHes made from idle and
	// received by a subscriber: the floor of a handoff over pub/sub.
	HandoffPublishes float64 `json:"handoff_p50_publishes,omitempty"`
	WaitMax          int64   `json:"wait_max_ns,omitempty"`
	Failures         int     `json:"failures"`
	Overlaps         int     `json:"overlaps"`

	// P50EtcdPuts is the p50 in etcd Puts of the ping scenario, and
	// HandoffEtcdPuts the handoff p50 (with -etcd).
	P50EtcdPuts     float64 `json:"p50_etcd_puts,omitempty"`
	HandoffEtcdPuts float64 `json:"handoff_p50_etcd_puts,omitempty"`
	// EtcdTripsPerOp is the etcd client's unary RPCs per op (per
	// acquisition in a convoy), with -etcd.
	EtcdTripsPerOp float64 `json:"etcd_round_trips_per_op,omitempty"`
	// EtcdTripP50 is the p50 of those RPCs' durations, ns: in a convoy,
	// what the etcd round trips in its handoffs took (convoys only).
	EtcdTripP50 int64 `json:"etcd_round_trip_p50_ns,omitempty"`
	// Tokens counts the grants that had a fencing token, every one checked
	// against the grant before it of the same lock; TokenRegressions, those
	// whose token was not above that grant's.
	Tokens           int `json:"tokens,omitempty"`
	TokenRegressions int `json:"token_regressions,omitempty"`

	// Costs per op (uncontended, keys-parallel): this process's CPU
	// (getrusage) over the measured ops, and, from INFO commandstats
	// deltas, the server time of the commands clients sent and the commands
	// run, script-internal ones included. Absent without commandstats
	// (miniredis).
	ClientCPUPerOp   *float64 `json:"client_cpu_ns_per_op,omitempty"`
	ServerUsecPerOp  *float64 `json:"server_usec_per_op,omitempty"`
	ServerCallsPerOp *float64 `json:"server_calls_per_op,omitempty"`

	// convoy-procs: processes, contenders per process, acquisitions that
	// succeeded, the wait p99 (as p99_ns), and the server's cost per
	// acquisition as above. From the ordering runs (absent on miniredis,
	// which has no MONITOR): the grants out of the server's arrival order,
	// of the grants whose arrival it placed, and for leasekit the grants out
	// of its wait queue's order, of the grants found in the queue.
	Procs           int   `json:"procs,omitempty"`
	Contenders      int   `json:"contenders,omitempty"`
	Acquired        int   `json:"acquired,omitempty"`
	WaitP99         int64 `json:"wait_p99_ns,omitempty"`
	OutOfOrder      *int  `json:"out_of_order,omitempty"`
	Arrived         int   `json:"arrived,omitempty"`
	OutOfQueueOrder *int  `json:"out_of_queue_order,omitempty"`
	Queued          int   `json:"queued,omitempty"`
	// Cold says a convoy-procs row's workers skipped their warm-up, so that
	// each one's first contender made the process's first acquisition;
	// ToWarm is then the makespan's ratio to the warm row's, of the same run.
	Cold   bool    `json:"cold,omitempty"`
	ToWarm float64 `json:"cold_to_warm,omitempty"`
	// MadeP50 is, in a cold row, the p50 time from "go" until a worker had
	// made its library's instance: a client's dial, for one that dials as
	// it is made (rueidis), which every acquisition of the worker waits for.
	MadeP50 int64 `json:"made_p50_ns,omitempty"`
	// Phases are a worker's first acquisition, by phase (convoy-procs
	// first acquire; handoff_p50_ns is the handoff that granted it, p50_ns
	// every other handoff's p50, and ratio its queueing in PINGs).
	Phases []phaseSpan `json:"phases,omitempty"`
	// semaphore: the limit, and the most holders seen at once.
	Limit             int      `json:"limit,omitempty"`
	MaxHolders        int      `json:"max_holders,omitempty"`
	ServerCallsPerAcq *float64 `json:"server_calls_per_acq,omitempty"`
	ServerUsecPerAcq  *float64 `json:"server_usec_per_acq,omitempty"`
}

// writeRows writes one scenario's rows: a table, or JSON lines. Rows of
// another scenario that it returned with its own (convoy-procs's first
// acquire) get a table of their own.
func writeRows(w io.Writer, asJSON bool, scenario string, rows []row) error {
	if i := slices.IndexFunc(rows, func(r row) bool { return r.Scenario != scenario }); i >= 0 && !asJSON {
		if i > 0 {
			if err := writeRows(w, false, scenario, rows[:i]); err != nil {
				return err
			}
		}
		return writeRows(w, false, rows[i].Scenario, rows[i:])
	}
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\n%s\n", scenario)
	cols := columnsOf(scenario, rows)
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t", c.title)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		for _, c := range cols {
			fmt.Fprintf(tw, "%s\t", c.value(r))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// column is one column of a scenario's table.
type column struct {
	title string
	value func(r row) string
}

// tables are the scenarios' columns, by scenario; a convoy of N has
// convoyColumns.
var tables = map[string]func() []column{
	"ping":               pingColumns,
	"uncontended":        uncontendedColumns,
	"keys-parallel":      keysParallelColumns,
	"convoy-procs":       convoyProcsColumns,
	firstAcquireScenario: firstAcquireColumns,
	"election":           electionColumns,
	"semaphore":          semaphoreColumns,
}

// columnsOf are the columns of scenario's table of rows: its table's, and
// the etcd columns when rows were measured with -etcd.
func columnsOf(scenario string, rows []row) []column {
	cols := convoyColumns
	if c, ok := tables[scenario]; ok {
		cols = c
	}
	out := cols()
	if !slices.ContainsFunc(rows, func(r row) bool { return r.P50EtcdPuts > 0 || r.HandoffEtcdPuts > 0 }) {
		return out
	}
	for _, e := range etcdColumns {
		if i := slices.IndexFunc(out, func(c column) bool { return c.title == e.after }); i >= 0 {
			out = slices.Insert(out, i+1, e.column)
		}
	}
	return out
}

// etcdColumns are the columns that the tables of uncontended and the
// convoys add with -etcd, each after the column titled after.
var etcdColumns = []struct {
	after string
	column
}{
	{"p50 ÷ 2×PING", column{"p50 ÷ etcd Put", func(r row) string { return fmt.Sprintf("%.2f×", r.P50EtcdPuts) }}},
	{"trips/op", column{"etcd trips/op", func(r row) string { return fmt.Sprintf("%.2f", r.EtcdTripsPerOp) }}},
	{"÷ PUBLISH", column{"÷ etcd Put", func(r row) string { return fmt.Sprintf("%.1f", r.HandoffEtcdPuts) }}},
	{"trips/acq", column{"etcd trips/acq", func(r row) string { return fmt.Sprintf("%.2f", r.EtcdTripsPerOp) }}},
	{"etcd trips/acq", column{"etcd trip p50", func(r row) string {
		if r.EtcdTripP50 == 0 {
			return "-"
		}
		return fmtDur(time.Duration(r.EtcdTripP50))
	}}},
}

// The columns that several tables share.
var (
	libColumn = column{"lib", func(r row) string {
		if r.Reference {
			return r.Lib + " (ref)"
		}
		return r.Lib
	}}
	nColumn       = column{"n", func(r row) string { return fmt.Sprint(r.N) }}
	p50Column     = column{"p50", func(r row) string { return fmtDur(time.Duration(r.P50)) }}
	p99Column     = column{"p99", func(r row) string { return fmtDur(time.Duration(r.P99)) }}
	tripsColumn   = column{"trips/op", func(r row) string { return fmt.Sprintf("%.2f", r.TripsPerOp) }}
	cpuColumn     = column{"cpu/op", func(r row) string { return fmtDurOpt(r.ClientCPUPerOp) }}
	srvUsecOp     = column{"srv µs/op", func(r row) string { return fmtOpt(r.ServerUsecPerOp, "%.2f") }}
	srvCallsOp    = column{"srv cmds/op", func(r row) string { return fmtOpt(r.ServerCallsPerOp, "%.1f") }}
	srvUsecAcq    = column{"srv µs/acq", func(r row) string { return fmtOpt(r.ServerUsecPerAcq, "%.1f") }}
	srvCallsAcq   = column{"srv cmds/acq", func(r row) string { return fmtOpt(r.ServerCallsPerAcq, "%.1f") }}
	failuresCol   = column{"failures", func(r row) string { return fmt.Sprint(r.Failures) }}
	overlapsCol   = column{"overlaps", func(r row) string { return fmt.Sprint(r.Overlaps) }}
	acquiredCol   = column{"acquired", func(r row) string { return fmt.Sprint(r.Acquired) }}
	makespanCol   = column{"makespan", func(r row) string { return fmtDur(time.Duration(r.Makespan)) }}
	idealCol      = column{"ideal", func(r row) string { return fmtDur(time.Duration(r.IdealNs)) }}
	handoffP50    = column{"handoff p50", func(r row) string { return fmtDur(time.Duration(r.HandoffP50)) }}
	handoffP99    = column{"handoff p99", func(r row) string { return fmtDur(time.Duration(r.HandoffP99)) }}
	procsColumn   = column{"P", func(r row) string { return fmt.Sprint(r.Procs) }}
	contendersCol = column{"C", func(r row) string { return fmt.Sprint(r.Contenders) }}
)

// timesColumn is a row's ratio, titled title.
func timesColumn(title string) column {
	return column{title, func(r row) string { return fmt.Sprintf("%.2f×", r.Ratio) }}
}

func pingColumns() []column {
	return []column{libColumn, nColumn, p50Column, p99Column, timesColumn("p50 ÷ PING")}
}

func uncontendedColumns() []column {
	return []column{libColumn, nColumn, p50Column, p99Column, timesColumn("p50 ÷ 2×PING"),
		{"allocs/op", func(r row) string { return fmt.Sprintf("%.1f", *r.AllocsPerOp) }},
		cpuColumn, srvUsecOp, srvCallsOp, tripsColumn, failuresCol}
}

func keysParallelColumns() []column {
	return []column{libColumn, {"ops/s", func(r row) string { return fmt.Sprintf("%.0f", r.OpsPerS) }},
		{"of SET", func(r row) string { return fmt.Sprintf("%.0f%%", 100*r.Ratio) }},
		p50Column, p99Column, cpuColumn, srvUsecOp, srvCallsOp, tripsColumn, failuresCol}
}

func convoyProcsColumns() []column {
	return []column{libColumn, procsColumn, contendersCol, startColumn, acquiredCol, makespanCol, idealCol,
		timesColumn("÷ ideal"),
		{"÷ warm", func(r row) string {
			if !r.Cold || r.ToWarm == 0 {
				return ""
			}
			return fmt.Sprintf("%.2f×", r.ToWarm)
		}},
		{"made p50", func(r row) string {
			if !r.Cold || r.MadeP50 == 0 {
				return ""
			}
			return fmtDur(time.Duration(r.MadeP50))
		}},
		handoffP50, handoffP99, {"wait p99", p99Column.value},
		{"out of order", func(r row) string { return fmtOf(r.OutOfOrder, r.Arrived) }},
		{"out of queue", func(r row) string { return fmtOf(r.OutOfQueueOrder, r.Queued) }},
		srvUsecAcq, srvCallsAcq, failuresCol, overlapsCol}
}

// convoyColumns are the table of a convoy of N in this process.
func convoyColumns() []column {
	return []column{libColumn, {"acquired", func(r row) string { return fmt.Sprint(r.N - r.Failures) }},
		makespanCol, idealCol, timesColumn("÷ ideal"), handoffP50,
		{"÷ PING", func(r row) string { return fmt.Sprintf("%.1f", r.HandoffPings) }},
		{"÷ idle PING", func(r row) string { return fmt.Sprintf("%.1f", r.HandoffIdlePings) }},
		{"÷ PUBLISH", func(r row) string {
			if r.HandoffPublishes == 0 {
				return "-" // the PUBLISH reference could not be measured
			}
			return fmt.Sprintf("%.1f", r.HandoffPublishes)
		}},
		handoffP99, {"wait p50", p50Column.value}, {"wait p99", p99Column.value},
		{"wait max", func(r row) string { return fmtDur(time.Duration(r.WaitMax)) }},
		{"trips/acq", tripsColumn.value}, failuresCol, overlapsCol}
}

// startColumn says whether a convoy-procs row's workers were warm or cold.
var startColumn = column{"start", func(r row) string { return startName(r.Cold) }}

// fmtOf prints "k/n", or "-" when k is unknown.
func fmtOf(k *int, n int) string {
	if k == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", *k, n)
}

// fmtDurOpt prints the duration of ns, or "-" when it is unknown.
func fmtDurOpt(ns *float64) string {
	if ns == nil {
		return "-"
	}
	return fmtDur(time.Duration(*ns))
}

// fmtOpt prints v with format, or "-" when it is unknown.
func fmtOpt(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// progress keeps one status line on stderr while the bench runs, with the
// step ("run 2/3") and the time since its scenario began: rewritten in
// place on a terminal, and elsewhere (a log, CI) a line when a scenario
// begins and then at most one every progressEvery.
type progress struct {
	w           io.Writer
	tty         bool
	scenario    string
	start, last time.Time // the scenario's start, and the last line out
}

// progressEvery is the most often a progress line goes to a non-terminal.
const progressEvery = 5 * time.Second

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, tty: tty}
}

func (p *progress) say(scenario, detail string) {
	now := time.Now()
	if scenario != p.scenario {
		p.scenario, p.start, p.last = scenario, now, time.Time{}
	}
	line := fmt.Sprintf("%s: %s, %v", scenario, detail, now.Sub(p.start).Round(time.Second))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	if !p.last.IsZero() && now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, "bench: %s\n", line)
}

func (p *progress) clear() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// writeSummary ends a run's tables with its headline ratios, one line per
// table (and, in convoy-procs, per process count and start): each
// subject's ratio to the table's reference, as its ratio column has it.
func writeSummary(w io.Writer, rows []row) {
	type group struct{ title, to string }
	var order []group
	libs := map[group][]string{}
	for _, r := range rows {
		if r.Reference || r.RatioTo == "" || r.Ratio == 0 {
			continue
		}
		title := r.Scenario
		if r.Procs > 0 {
			title = fmt.Sprintf("%s P=%d %s", r.Scenario, r.Procs, startName(r.Cold))
		}
		g := group{title, r.RatioTo}
		if _, seen := libs[g]; !seen {
			order = append(order, g)
		}
		libs[g] = append(libs[g], fmt.Sprintf("%s %.2f", r.Lib, r.Ratio))
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsummary (each subject ÷ its table's reference)\n")
	for _, g := range order {
		fmt.Fprintf(w, "  %s, ÷ %s: %s\n", g.title, g.to, strings.Join(libs[g], ", "))
	}
}
