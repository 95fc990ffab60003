// Package telemetry records leasekit's OpenTelemetry metrics and spans, for
// the Lockers of efficiency and correctness and for the fences. It uses the
// OpenTelemetry API only: a program that installs no SDK pays for an atomic
// load and a few precomputed options per operation, and allocates nothing.
//
// Telemetry never changes locking: recording a measurement or ending a span
// hands it to the SDK, whose exporters run on their own goroutines (with a
// batch span processor and a periodic reader, as production setups use), so a
// slow or failing exporter cannot hold up or fail a lock operation. A span
// processor that exports synchronously (the SDK's SimpleSpanProcessor, meant
// for tests) makes each span's end wait for its exporter.
//
// No attribute or event carries an owner id, and lock names appear only
// through Config.NameAttribute, since unbounded names would make unbounded
// metric series.
package telemetry

import (
	"context"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of every meter and tracer.
const Scope = "github.com/leasekit/leasekit"

// Attribute keys.
const (
	KindKey    = attribute.Key("leasekit.lock.kind")
	OutcomeKey = attribute.Key("leasekit.lock.outcome")
	WaitedKey  = attribute.Key("leasekit.lock.waited")
	ReasonKey  = attribute.Key("leasekit.lock.lost.reason")
	NameKey    = attribute.Key("leasekit.lock.name")
	LimitKey   = attribute.Key("leasekit.lock.limit")
	FenceKey   = attribute.Key("leasekit.fence")
	TermKey    = attribute.Key("leasekit.election.term")
)

// Outcome is how an acquire ended, as the acquire.duration attribute says it.
type Outcome int

// The outcomes of an acquire.
const (
	Obtained    Outcome = iota // the lock is the caller's
	NotObtained                // another owner holds it, or ctx ended first
	Late                       // granted, but the reply came after its deadline
	Closed                     // the Locker was closed
	Failed                     // any other error
	outcomes
)

var outcomeNames = [outcomes]string{"obtained", "not_obtained", "late", "closed", "error"}

// Reason is why a lease was lost while held.
type Reason int

// The reasons a lease is lost.
const (
	KeyGone      Reason = iota // the key expired or was deleted
	AnotherOwner               // another owner holds the lock
	Unreachable                // Redis could not confirm it before the deadline
	reasons
)

var reasonNames = [reasons]string{"key_gone", "another_owner", "unreachable"}

// Config says where a Telemetry records.
type Config struct {
	// Kind is "efficiency" or "correctness".
	Kind string
	// MeterProvider and TracerProvider: nil means the global ones.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// NameAttribute maps a lock name to the value of the leasekit.lock.name
	// attribute, from a bounded set; "" (and a nil func) leaves it out.
	NameAttribute func(name string) string
}

// Telemetry records one Locker's (or fence's) metrics and spans. A nil
// *Telemetry records nothing.
type Telemetry struct {
	cfg      Config
	tracer   trace.Tracer
	explicit bool // a TracerProvider was given: always trace
	kind     attribute.KeyValue

	acquireDur, holdDur metric.Float64Histogram
	lost, refreshFails  metric.Int64Counter
	waiters, held       metric.Int64UpDownCounter
	leading             metric.Int64UpDownCounter
	handoffs, rejected  metric.Int64Counter
	breaks              metric.Int64Counter

	acquireOpts [outcomes][2][]metric.RecordOption
	holdOpts    [2][]metric.RecordOption // released, lost
	lostOpts    [reasons][]metric.AddOption
	kindOpts    []metric.AddOption
	spanOpts    []trace.SpanStartOption
	spanNames   map[string]string // op -> "kind.op", built once
	spanPrefix  string            // "kind."
}

// ops are the operations that have spans.
var ops = []string{"TryObtain", "Obtain", "TryAcquire", "Acquire", "Do", "Hold", "Once", "Release", "Campaign", "Lead", "Break"}

// New returns a Telemetry for cfg. Instruments that the provider refuses
// (a broken SDK) record nothing rather than fail the Locker.
func New(cfg Config) *Telemetry {
	mp, tp := cfg.MeterProvider, cfg.TracerProvider
	t := &Telemetry{cfg: cfg, explicit: tp != nil, kind: KindKey.String(cfg.Kind)}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(Scope)
	t.tracer = tp.Tracer(Scope)
	t.acquireDur = histogram(m, "leasekit.lock.acquire.duration", "How long an acquire took, from the call to its return, waiting included.")
	t.holdDur = histogram(m, "leasekit.lock.hold.duration", "How long a lock was held, from its grant to its release or loss.")
	t.lost = counter(m, "leasekit.lock.lost", "Leases lost while held.")
	t.refreshFails = counter(m, "leasekit.lock.refresh.failures", "Refreshes that failed (the lease may still be confirmed by a later one).")
	t.handoffs = counter(m, "leasekit.lock.handoffs", "Grants a release handed straight to a queued waiter.")
	t.breaks = counter(m, "leasekit.lock.breaks", "Leases an operator ended with Break, whose holder was not asked.")
	t.rejected = counter(m, "leasekit.fence.rejections", "Requests a fence refused: an older token (reason stale), or one beyond the clock ceiling (reason ahead).")
	t.waiters = upDown(m, "leasekit.lock.waiters", "This Locker's acquires waiting now.")
	t.held = upDown(m, "leasekit.lock.held", "Locks this Locker granted that have not been released or seen lost.")
	t.leading = upDown(m, "leasekit.election.leader", "Elections this Locker leads now: 1 while it leads one.")
	t.attributes(cfg.Kind + ".")
	return t
}

// Semaphore returns the Telemetry of a semaphore with limit permits: the
// same instruments, whose measurements carry the attribute
// leasekit.lock.limit, and spans named kind.Semaphore.op. A nil t returns
// nil.
func (t *Telemetry) Semaphore(limit int) *Telemetry {
	if t == nil {
		return nil
	}
	s := *t
	s.attributes(t.cfg.Kind+".Semaphore.", LimitKey.Int(limit))
	return &s
}

// attributes precomputes the attribute sets of every measurement, with t's
// kind and extra, and the span names, op prefixed.
func (t *Telemetry) attributes(prefix string, extra ...attribute.KeyValue) {
	set := func(kvs ...attribute.KeyValue) attribute.Set {
		return attribute.NewSet(append(append([]attribute.KeyValue{t.kind}, extra...), kvs...)...)
	}
	for o := range outcomes {
		for w, waited := range []bool{false, true} {
			t.acquireOpts[o][w] = []metric.RecordOption{metric.WithAttributeSet(set(OutcomeKey.String(outcomeNames[o]), WaitedKey.Bool(waited)))}
		}
	}
	for i, outcome := range []string{"released", "lost"} {
		t.holdOpts[i] = []metric.RecordOption{metric.WithAttributeSet(set(OutcomeKey.String(outcome)))}
	}
	for r := range reasons {
		t.lostOpts[r] = []metric.AddOption{metric.WithAttributeSet(set(ReasonKey.String(reasonNames[r])))}
	}
	t.kindOpts = []metric.AddOption{metric.WithAttributeSet(set())}
	t.spanOpts = []trace.SpanStartOption{trace.WithAttributes(append([]attribute.KeyValue{t.kind}, extra...)...)}
	t.spanPrefix = prefix
	t.spanNames = make(map[string]string, len(ops))
	for _, op := range ops {
		t.spanNames[op] = prefix + op
	}
}

func histogram(m metric.Meter, name, desc string) metric.Float64Histogram {
	h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
	}
	if h == nil {
		return metricnoop.Float64Histogram{}
	}
	return h
}

func counter(m metric.Meter, name, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
	}
	if c == nil {
		return metricnoop.Int64Counter{}
	}
	return c
}

func upDown(m metric.Meter, name, desc string) metric.Int64UpDownCounter {
	c, err := m.Int64UpDownCounter(name, metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
	}
	if c == nil {
		return metricnoop.Int64UpDownCounter{}
	}
	return c
}

// tracing reports whether spans are worth starting: a TracerProvider was
// given, or an SDK has been installed as the global one since. Until then
// the global provider's spans record nothing, yet each would cost
// allocations.
func (t *Telemetry) tracing() bool {
	if t.explicit {
		return true
	}
	tp := otel.GetTracerProvider()
	if _, isNoop := tp.(noop.TracerProvider); isNoop {
		return false
	}
	typ := reflect.TypeOf(tp)
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ == nil || typ.PkgPath() != globalPkg
}

// globalPkg is the package of the global providers' placeholders, which
// record nothing until an SDK is installed.
const globalPkg = "go.opentelemetry.io/otel/internal/global"

// Start begins a span called name (Do, Hold, Once, Release, an acquire) for
// the lock called lock, if tracing, with the kind and the lock's name
// attribute; End ends it.
func (t *Telemetry) Start(ctx context.Context, name, lock string) (context.Context, trace.Span) {
	if t == nil || !t.tracing() {
		return ctx, nil
	}
	opts := t.spanOpts
	if v := t.nameOf(lock); v != "" {
		opts = append(opts[:len(opts):len(opts)], trace.WithAttributes(NameKey.String(v)))
	}
	span, ok := t.spanNames[name]
	if !ok {
		span = t.spanPrefix + name
	}
	return t.tracer.Start(ctx, span, opts...)
}

func (t *Telemetry) nameOf(lock string) string {
	if t.cfg.NameAttribute == nil || lock == "" {
		return ""
	}
	return t.cfg.NameAttribute(lock)
}

// named returns the precomputed attribute set set, or, when NameAttribute
// names the lock, set with the name added: a set built per call, which only a
// program that asked for names pays for.
func (t *Telemetry) named(set attribute.Set, lock string) attribute.Set {
	v := t.nameOf(lock)
	if v == "" {
		return set
	}
	return attribute.NewSet(append(set.ToSlice(), NameKey.String(v))...)
}

func (t *Telemetry) record(ctx context.Context, h metric.Float64Histogram, v float64, opts []metric.RecordOption, lock string) {
	if t.nameOf(lock) != "" {
		opts = []metric.RecordOption{metric.WithAttributeSet(t.named(metric.NewRecordConfig(opts).Attributes(), lock))}
	}
	h.Record(ctx, v, opts...)
}

func (t *Telemetry) add(ctx context.Context, c interface {
	Add(context.Context, int64, ...metric.AddOption)
}, n int64, opts []metric.AddOption, lock string) {
	if t.nameOf(lock) != "" {
		opts = []metric.AddOption{metric.WithAttributeSet(t.named(metric.NewAddConfig(opts).Attributes(), lock))}
	}
	c.Add(ctx, n, opts...)
}

// Acquire is one acquire's telemetry, from StartAcquire to End.
type Acquire struct {
	t       *Telemetry
	ctx     context.Context
	lock    string
	start   time.Time
	span    trace.Span
	waiting bool
	waited  bool
}

// StartAcquire begins the telemetry of an acquire, op (TryObtain, Obtain,
// TryAcquire, Acquire), of the lock called lock: its span, if tracing, is in
// the returned context.
func (t *Telemetry) StartAcquire(ctx context.Context, op, lock string) (context.Context, Acquire) {
	if t == nil {
		return ctx, Acquire{}
	}
	ctx, span := t.Start(ctx, op, lock)
	return ctx, Acquire{t: t, ctx: ctx, lock: lock, start: time.Now(), span: span}
}

// Event adds an event (queued, handed over, woken, late grant) to the
// acquire's span.
func (a *Acquire) Event(name string) {
	if a.span != nil && a.span.IsRecording() {
		a.span.AddEvent(name)
	}
}

// Wait counts the acquire among the Locker's waiters until Done.
func (a *Acquire) Wait() {
	if a.t == nil || a.waiting {
		return
	}
	a.waiting, a.waited = true, true
	a.t.add(a.ctx, a.t.waiters, 1, a.t.kindOpts, a.lock)
}

// Done ends the wait that Wait began.
func (a *Acquire) Done() {
	if a.t == nil || !a.waiting {
		return
	}
	a.waiting = false
	a.t.add(a.ctx, a.t.waiters, -1, a.t.kindOpts, a.lock)
}

// End records the acquire's duration and outcome, ends its span, and counts
// a grant among the held locks. The span carries the outcome as an attribute
// and err as its error status, except for NotObtained: a lock held by another
// owner, or a ctx that ended first, is an outcome, not an error.
func (a *Acquire) End(o Outcome, err error) {
	if a.t == nil {
		return
	}
	a.Done()
	w := 0
	if a.waited {
		w = 1
	}
	a.t.record(a.ctx, a.t.acquireDur, Since(a.start), a.t.acquireOpts[o][w], a.lock)
	if o == Obtained {
		a.t.add(a.ctx, a.t.held, 1, a.t.kindOpts, a.lock)
	}
	if a.span != nil && a.span.IsRecording() {
		a.span.SetAttributes(OutcomeKey.String(outcomeNames[o]), WaitedKey.Bool(a.waited))
	}
	if o == NotObtained {
		err = nil
	}
	End(a.span, err)
}

// HoldEnded records a lease held since granted that was released, or lost
// for reason (when lost is true), and takes it out of the held locks.
func (t *Telemetry) HoldEnded(ctx context.Context, lock string, granted time.Time, lost bool, reason Reason) {
	if t == nil {
		return
	}
	i := 0
	if lost {
		i = 1
		t.add(ctx, t.lost, 1, t.lostOpts[reason], lock)
	}
	t.record(ctx, t.holdDur, Since(granted), t.holdOpts[i], lock)
	t.add(ctx, t.held, -1, t.kindOpts, lock)
}

// Handoff counts a grant a release handed to a queued waiter.
func (t *Telemetry) Handoff(ctx context.Context, lock string) {
	if t != nil {
		t.add(ctx, t.handoffs, 1, t.kindOpts, lock)
	}
}

// Broken counts a lease an operator ended with Break.
func (t *Telemetry) Broken(ctx context.Context, lock string) {
	if t != nil {
		t.add(ctx, t.breaks, 1, t.kindOpts, lock)
	}
}

// Leading adds delta (1 when a term begins, -1 when it ends) to the
// elections this Locker leads.
func (t *Telemetry) Leading(ctx context.Context, lock string, delta int64) {
	if t != nil {
		t.add(ctx, t.leading, delta, t.kindOpts, lock)
	}
}

// Term puts an election's term on the span in ctx, if one is recording.
func Term(ctx context.Context, term uint64) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(TermKey.Int64(int64(term)))
	}
}

// RefreshFailed counts a failed refresh and adds it, as an event, to the span
// in ctx (the hold's).
func (t *Telemetry) RefreshFailed(ctx context.Context, lock string, err error) {
	if t == nil {
		return
	}
	t.add(ctx, t.refreshFails, 1, t.kindOpts, lock)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("refresh failed", trace.WithAttributes(attribute.String("error", err.Error())))
	}
}

// FenceReasonKey is the attribute that says why a fence refused a request.
const FenceReasonKey = attribute.Key("leasekit.fence.reason")

// Rejected counts a request that fence (register, sql, http) refused, for
// reason: "stale" (an older token) or "ahead" (beyond the clock ceiling).
func (t *Telemetry) Rejected(ctx context.Context, fence, reason string) {
	if t != nil {
		t.rejected.Add(ctx, 1, metric.WithAttributes(t.kind, FenceKey.String(fence), FenceReasonKey.String(reason)))
	}
}

// Since is the time since start in seconds, as the duration histograms take it.
func Since(start time.Time) float64 { return time.Since(start).Seconds() }

// End ends span (nil when not tracing) with err's status.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
