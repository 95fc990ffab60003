package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// convoy-procs: P worker processes, each with its own client and its own
// instance of the library, C contenders each, all on one key. To give
// "arrival order" a meaning, the lock is held first by the parent, and the
// contenders arrive one at a time, procStagger apart (more than a waiter's
// probe and queueing round trips, and the scheduling noise of a 2-vCPU
// machine; the tests, under -race, space them wider), interleaved across the
// processes (contender c of worker p is arrival c·P + p); once all have
// arrived the parent releases it, and the convoy drains. The makespan runs
// from that release to the last contender's release.
const (
	procStagger = 2 * time.Millisecond
	procSettle  = 20 * time.Millisecond // after the last arrival, before the release
	procStartIn = 20 * time.Millisecond // from "go" to the first arrival
)

// stagger is the time between two arrivals in convoy-procs.
func (b *bench) stagger() time.Duration {
	if b.cfg.stagger > 0 {
		return b.cfg.stagger
	}
	return procStagger
}

// openLockWorker readies a convoy-procs worker: its library's instance on
// t, a lock worker's contention for cc's key, warmed up unless cc says cold.
func openLockWorker(ctx context.Context, t *target, cc childConfig) (contention, func(), error) {
	c := contention{ttl: cc.TTL, hold: cc.Hold, order: cc.Order}
	if cc.Phases {
		c.phases = &phaseHook{}
		t.client.AddHook(c.phases)
	}
	lib, ok := libraryNamed(cc.Lib)
	if !ok {
		return c, nil, fmt.Errorf("unknown library %q", cc.Lib)
	}
	l, err := lib.open(t, t.client, cc.TTL)
	if err != nil {
		return c, nil, err
	}
	c.acquire = func(ctx context.Context) (held, error) { return l.acquire(ctx, cc.Key) }
	if !cc.Cold {
		// Bounded: a peer's waiter that misses its wake-up (see
		// bench/README.md) must not keep the convoy from starting; a
		// library that cannot acquire at all fails in the convoy.
		warmUp(ctx, c.acquire)
	}
	return c, func() { _ = l.close() }, nil
}

// procsResult pools one library's convoys at one P, warm or cold.
type procsResult struct {
	pool
	handoffs samples
	notRun   int // convoys that could not run (a worker failed to start, say)
	order    orderResult
	phases   phaseResult
	// made are the cold workers' times from "go" to their library's
	// instance made, one per contender.
	made samples
}

// orderResult pools the ordering convoys of one library at one P.
type orderResult struct {
	runs            int // ordering convoys that ran
	outOfOrder      int // grants out of the server's arrival order
	arrived         int // grants whose arrival the server's stream placed
	outOfQueueOrder int // grants out of the wait queue's order
	queued          int // grants whose place in the queue was read
	failures        int
	overlaps        int
}

// starts are convoy-procs's two kinds of worker, by whether they are cold.
var starts = [...]bool{false, true}

// startsOf is the order in which round r runs the warm and cold convoys:
// they take turns going first.
func startsOf(r int) [2]bool {
	if r%2 == 1 {
		return [2]bool{true, false}
	}
	return starts
}

// convoyProcs runs convoy-procs for every P of -procs, each library in turn,
// with warm workers and cold ones.
func (b *bench) convoyProcs(ctx context.Context) []row {
	const scenario = "convoy-procs"
	reps := b.convoyReps()
	libs := b.libsIn(scenario)
	for _, lib := range libs {
		// An untimed convoy of two in this process loads the scripts a
		// waiter and a handoff run, so that no timed window pays for
		// compiling them (an EVAL after NOSCRIPT).
		b.prog.say(scenario, "warm-up, "+lib.name)
		b.runConvoy(ctx, &convoyResult{}, lib.l, b.key(scenario, lib.name+":warm"), 2)
	}
	var rows, phaseRows []row
	for _, p := range b.cfg.procs {
		var res [2][]procsResult // by cold, then library
		for s := range res {
			res[s] = make([]procsResult, len(libs))
		}
		for r := range reps {
			for i, lib := range libs {
				for _, cold := range startsOf(r) {
					b.prog.say(scenario, fmt.Sprintf("P=%d run %d/%d, %s, %s", p, r+1, reps, lib.name, startName(cold)))
					res := &res[btoi(cold)][i]
					if err := b.runProcConvoy(ctx, res, lib, p, false, cold); err != nil {
						res.notRun++
						res.errs = append(res.errs, err.Error())
					}
				}
			}
		}
		for r := range reps {
			if b.target.mini != nil {
				break // miniredis has no MONITOR
			}
			for i, lib := range libs {
				for _, cold := range startsOf(r) {
					b.prog.say(scenario, fmt.Sprintf("P=%d ordering run %d/%d, %s, %s", p, r+1, reps, lib.name, startName(cold)))
					if err := b.runProcConvoy(ctx, &res[btoi(cold)][i], lib, p, true, cold); err != nil {
						b.note(fmt.Sprintf("note: convoy-procs P=%d, %s, %s: an ordering run failed: %v", p, lib.name, startName(cold), err))
					}
				}
			}
		}
		for i, lib := range libs {
			warm := res[0][i].row(scenario, lib.name, p, false, b)
			cold := res[1][i].row(scenario, lib.name, p, true, b)
			cold.ToWarm = ratio(cold.Makespan, warm.Makespan)
			rows = append(rows, warm, cold)
			if b.libQueues(lib.name) && !lib.lib.ownClient {
				for _, cold := range starts {
					phaseRows = append(phaseRows, res[btoi(cold)][i].phases.row(lib.name, p, cold, b))
				}
			}
		}
	}
	return append(rows, phaseRows...)
}

// startName says whether a convoy's workers were cold.
func startName(cold bool) string {
	if cold {
		return "cold"
	}
	return "warm"
}

// runProcConvoy runs one convoy of p workers for lib: a timed one, or with
// order an ordering one (see order.go), whose times are not kept.
func (b *bench) runProcConvoy(ctx context.Context, res *procsResult, lib openLib, p int, order, cold bool) error {
	key := b.key("convoy-procs", fmt.Sprintf("%s:P%d", lib.name, p))
	n := p * b.cfg.perProc
	cc := b.childConfig(key)
	cc.Lib, cc.Order, cc.Cold, cc.Phases = lib.name, order, cold, !order && b.libQueues(lib.name)
	if cold && !order {
		cc.Stagger = 0
	}
	ws, err := startWorkers(ctx, "worker", cc, p)
	if err != nil {
		return err
	}
	if cold && !order {
		return b.runColdConvoy(ctx, res, ws, n)
	}
	release, err := b.parentHold(ctx, lib.l, key)
	if err != nil {
		stopWorkers(ws)
		return fmt.Errorf("the parent's hold: %w", err)
	}
	var o *ordering
	if order {
		if o, err = startOrdering(ctx, b.target); err != nil {
			stopWorkers(ws)
			_ = release()
			return err
		}
		defer o.close()
	}
	before := b.costSnap(ctx)
	b.settle(launch(ws), n)
	if order && lib.lib.queue != nil {
		if o.queue, err = readQueue(ctx, b.client, lib.lib.queue(key), n); err != nil {
			b.note(fmt.Sprintf("note: convoy-procs, %s: reading the wait queue: %v", lib.name, err))
		}
	}
	t0 := time.Now()
	if err := release(); err != nil {
		stopWorkers(ws)
		return fmt.Errorf("the parent's release: %w", err)
	}
	all, sent, err := b.reports(ws)
	if err != nil {
		return err
	}
	if order {
		arrivals, err := o.arrivals(ctx, b.target, b.id)
		res.order.add(all, arrivals, o.queue, lib.lib.queue != nil)
		return err
	}
	res.add(all, t0, costOf(before, b.costSnap(ctx), n, sent))
	return nil
}

// runColdConvoy times a cold convoy as a user's fresh processes meet it:
// no hold by the parent and no stagger, every contender of every worker
// arriving at "go", each worker making its library's instance (its client,
// for a library whose client dials as it is made) after it; the makespan
// runs from "go" to the last release, dials, subscriptions and first
// attempts included.
func (b *bench) runColdConvoy(ctx context.Context, res *procsResult, ws []*child, n int) error {
	before := b.costSnap(ctx)
	t0 := launchIn(ws, 0)
	all, sent, err := b.reports(ws)
	if err != nil {
		return err
	}
	res.add(all, t0, costOf(before, b.costSnap(ctx), n, sent))
	return nil
}

// parentHold takes key for the parent, before the contenders arrive, and
// returns what releases it. The wait is bounded like a contender's, since a
// peer's waiter can miss its wake-up and sleep until its context ends
// (rueidislock); the hold is not, since rueidislock's lock ends with the
// context it was taken with.
func (b *bench) parentHold(ctx context.Context, l locker, key string) (release func() error, err error) {
	hctx, cancel := context.WithCancel(ctx)
	giveUp := time.AfterFunc(b.cfg.ttl, cancel)
	h, err := l.acquire(hctx, key)
	if !giveUp.Stop() && err == nil {
		_ = h.Release(ctx)
		err = errors.New("acquired as its wait timed out")
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return func() error {
		defer cancel()
		return h.Release(ctx)
	}, nil
}

// reports reads every worker's report: the contenders, and the commands
// the workers sent. A worker reports within a ttl of the release (its
// contenders give up after one); one that has not after twice that hangs
// (a peer's release that never returns, say), and is killed so that the

// ranked by the server's arrival order and, for a library that queues, by
// the queue read before the release.
func (r *orderResult) add(cs []procContender, arrivals map[string]arrival, queue []string, queues bool) {
	r.runs++
	var ok []procContender
	for _, c := range cs {
		if c.Err != "" {
			r.failures++
			continue
		}
		ok = append(ok, c)
	}
	slices.SortFunc(ok, func(a, b procContender) int { return cmp.Compare(a.Granted, b.Granted) })
	for i := 1; i < len(ok); i++ {
		if ok[i].Granted < ok[i-1].Releasing {
			r.overlaps++
		}
	}
	out, known := outOfOrder(arrivalRanks(ok, arrivals))
	r.outOfOrder, r.arrived = r.outOfOrder+out, r.arrived+known
	if queues {
		out, known := outOfOrder(queueRanks(ok, queue))
		r.outOfQueueOrder, r.queued = r.outOfQueueOrder+out, r.queued+known
	}
}

// add pools one convoy's contenders, released from t0, and its server cost.
func (r *procsResult) add(cs []procContender, t0 time.Time, c cost) {
	prev := t0.UnixNano()
	for _, pc := range cs {
		if pc.Made != 0 {
			r.made = append(r.made, time.Duration(pc.Made-t0.UnixNano()))
		}
	}
	for i, pc := range r.pool.add(cs, t0, c) {
		handoff := time.Duration(pc.Granted - prev)
		r.handoffs = append(r.handoffs, handoff)
		if pc.Phases != nil {
			r.phases.add(*pc.Phases)
			r.phases.firstHandoffs = append(r.phases.firstHandoffs, handoff)
		} else {
			r.phases.otherHandoffs = append(r.phases.otherHandoffs, handoff)
		}
		if i > 0 && pc.Granted < prev {
			r.overlaps++
		}
		prev = pc.Releasing
	}
}

// libQueues reports whether the library called name queues its waiters on
// the server.
func (b *bench) libQueues(name string) bool {
	l, ok := libraryNamed(name)
	return ok && l.queue != nil
}

func (r *procsResult) row(scenario, lib string, p int, cold bool, b *bench) row {
	out := r.pool.row(time.Duration(r.perRun()) * (r.holds.mean() + b.ping))
	out.Scenario, out.Lib, out.Procs, out.Contenders, out.Cold = scenario, lib, p, b.cfg.perProc, cold
	out.HandoffP50, out.HandoffP99 = int64(r.handoffs.p50()), int64(r.handoffs.p99())
	if len(r.made) > 0 {
		out.MadeP50 = int64(r.made.p50())
	}
	out.Overlaps += r.order.overlaps
	if o := r.order; o.runs > 0 {
		out.OutOfOrder, out.Arrived = &o.outOfOrder, o.arrived
		if o.queued > 0 || b.libQueues(lib) {
			out.OutOfQueueOrder, out.Queued = &o.outOfQueueOrder, o.queued
		}
		if o.failures > 0 {
			b.note(fmt.Sprintf("note: convoy-procs P=%d, %s, %s: %d failures in the ordering runs", p, lib, startName(cold), o.failures))
		}
	}
	if len(r.errs) > 0 {
		b.note(fmt.Sprintf("note: convoy-procs P=%d, %s, %s: %d failures, %d convoys not run, e.g. %s", p, lib, startName(cold), r.failures, r.notRun, r.errs[0]))
	}
	return out
}

// spinners are n processes that spin at the lowest priority while the
// latency scenarios (ping, uncontended) run, so that the machine's idle CPUs
// do not halt between round trips: on a VM, waking a halted vCPU costs more
// than a loopback round trip. They stop before the convoys and keys-parallel:
// there they would hold up the wake-ups of the very processes measured
