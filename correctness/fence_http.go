package correctness

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
)

// TokenHeader is the request header that carries the writer's fencing token,
// in decimal.
const TokenHeader = "Fencing-Token"

// FencingProxy is an http.Handler that fences a resource which cannot check
// tokens itself: it forwards a request to the protected handler only when the
// request's Fencing-Token is at least the highest token it has forwarded for
// the request's resource, and records it as the highest.
//
// So every request through it claims its resource, reads included: once a
// holder's GET has passed, a paused predecessor's PUT is refused, even if
// the holder has not written yet. A holder that reads, computes and writes
// back sends its reads through the proxy with its token; a read that goes
// around the proxy claims nothing, and the write built on it can lose an
// update.
//
// For each resource, checking the token, recording it as the highest and
// serving the request happen under one lock, held until the protected
// handler returns, so the backend sees a resource's requests in token order:
// a request with token 33 that passed the check can never reach the backend
// after one with token 34, and the one with 34 reaches it only once the
// backend has answered the one with 33. That holds whatever happens to the
// client meanwhile (a lease lost in Do cancels the request; a client may be
// killed): the handler gets a context that the client's cancellation does
// not end, with the request's values, and the response of a client that
// went away is read to its end and discarded. WithBackendTimeout bounds
// that: when it runs out, the handler's context ends, a ReverseProxy closes
// its connection to the backend, and the resource is free. A ReverseProxy
// closes it too when the client went away before the proxy had its whole
// body, leaving the backend a request cut short. So a backend must not
// apply a request whose connection it saw closed, or must check the token
// itself; and a handler that is no ReverseProxy must return once its
// context ends. The price is that requests for one resource are served
// one at a time, and a backend that hangs holds its resource for the bound;
// different resources do not wait for each other. A request waiting for its
// resource gives up when its context ends, with 503 Service Unavailable,
// and is not forwarded.
//
// The proxy fences only if it is the only path to the resource: one proxy,
// one process, every request through it. By default the highest tokens live
// in its memory alone, and a restarted proxy starts from 0 for every
// resource, so the first token it sees for a resource is accepted however old
// it is. WithProxyStore keeps them in Redis, where a restarted proxy finds
// them, for a bounded time (WithProxyRetention); memory holds a bounded
// number of resources (WithProxyLimit).
//
// In memory the proxy cannot tell a forged token: a request whose
// Fencing-Token is larger than any Locker issues is forwarded, and every
// later request for its resource gets 409 until the proxy restarts. With
// WithProxyStore and the clock floor on, such a token (more than an hour
// ahead of the Redis server's clock in microseconds) gets 400 Bad Request.
// Either way, only clients that hold leases may send tokens.
//
// To fence a remote service, make next a reverse proxy to it:
//
//	backend, _ := url.Parse("http://ledger.internal:8080")
//	proxy := correctness.NewFencingProxy(httputil.NewSingleHostReverseProxy(backend))
//	log.Fatal(http.ListenAndServe(":8080", proxy))
type FencingProxy struct {
	next     http.Handler
	resource func(*http.Request) string
	store    *Register // nil: memory alone
	limit    int
	keep     time.Duration // the store's retention
	bound    time.Duration // of the protected handler's context

	tel *telemetry.Telemetry // nil: fenceTelemetry's

	mu     sync.Mutex
	fences map[string]*fence
	idle   list.List            // of *fence, most recently used first
	floors [floorBuckets]uint64 // without a store: the highest token forgotten, by bucket
}

// floorBuckets is how many floors the resources a proxy forgot share, so
// that one resource's token lifts the floor of few others.
const floorBuckets = 1024

// fence is the state of one resource. The channel is its lock, with room for
// one holder, so that a waiting request can give up when its context ends.
type fence struct {
	lock chan struct{}
	// highest changes only under lock; it is atomic so that Highest can read
	// it without waiting for the request being served.
	highest atomic.Uint64
	// floored: highest is the floor of a resource the proxy forgot or
	// never saw, not a token it forwarded for this one. Under lock.
	floored bool

	name  string        // the key of FencingProxy.fences
	users int           // requests holding or waiting for lock, under FencingProxy.mu
	elem  *list.Element // in FencingProxy.idle
}

// ProxyOption configures a FencingProxy.
type ProxyOption func(*FencingProxy)

// WithResource sets the function that names the resource a request writes
// to; requests for one resource are fenced against each other. An empty name
// gets 400 Bad Request. Default: the request's URL path, cleaned, so that
// /a/../b and /b are one resource. Set it when the backend maps paths to
// resources differently (case, prefixes, a resource id in the query or body):
// two names for one resource would be two fences, and none.
func WithResource(f func(*http.Request) string) ProxyOption {
	return func(p *FencingProxy) {
		if f != nil {
			p.resource = f
		}
	}
}

// WithProxyMeterProvider sets where the proxy counts the requests it refuses
// (leasekit.fence.rejections). Default: the global provider.
func WithProxyMeterProvider(mp metric.MeterProvider) ProxyOption {
	return func(p *FencingProxy) {
		p.tel = telemetry.New(telemetry.Config{Kind: "correctness", MeterProvider: mp})
	}
}

// WithProxyStore keeps the highest token of each resource in Redis, through
// client, at <prefix>{resource}:proxy: a restarted proxy, or one that forgot
// a resource (WithProxyLimit), still refuses a token older than one
// forwarded before. Of the options only WithPrefix (default "leasekit:") and
// WithClockFloor apply. With the clock floor on (the default), the store
// refuses a token more than an hour ahead of the server clock, as Register
// does, and a key expires once no request has passed for its resource for
// the retention (WithProxyRetention). With WithClockFloor(false), which
// tokens that count grants need, keys never expire: such tokens carry no
// time, so a resource whose key expired could not be held to anything. Each
// key then costs about 145 bytes of Redis memory for a 21-byte path, more
// for a longer name (1.4 KB for 1.1 KB), until you delete the keys of
// resources gone for good. Each request that passes the proxy's memory
// costs one round trip to Redis; while Redis cannot be reached, requests get
// 503 Service Unavailable. Default: memory alone. WithProxyStore panics if
// client is nil.
func WithProxyStore(client redis.UniversalClient, opts ...Option) ProxyOption {
	if lease.IsNilClient(client) {
		panic("correctness: WithProxyStore: nil redis client")
	}
	store := NewRegister(client, opts...)
	return func(p *FencingProxy) { p.store = store }
}

// DefaultProxyRetention is how long the store of a FencingProxy keeps the
// highest token of a resource after the last request for it, unless
// WithProxyRetention sets another.
const DefaultProxyRetention = 24 * time.Hour

// minProxyRetention is the shortest retention. Under an hour, the floor of a
// resource the store holds no token for would be ahead of the clock, and
// refuse every holder; two hours leave a holder's token an hour.
const minProxyRetention = 2 * time.Hour

// WithProxyRetention sets how long the store (WithProxyStore, with the clock
// floor on) keeps the highest token of a resource after the last request it
// forwarded for it; each forwarded request restarts that time. A resource
// the store holds no token for (its key expired, was lost, or never was) is
// held to a floor from the Redis clock: a token below the server clock in
// microseconds, minus d, plus an hour, gets 409 Conflict. That never lets an
// older token through: the tokens of a key that expired were each forwarded
// first at least d ago, when the clock ceiling refused any token more than
// an hour ahead, so all are below the floor. The price: a holder that keeps
// one token longer than d less an hour (a long Hold, an election's term)
// gets 409 for a resource that no request reached within d, or a new one,
// and must acquire again; set d above the longest a token of yours lives.
// Redis keeps a key for each resource forwarded within the last d, about
// 195 bytes for a 21-byte path, and none longer (docs/fencing.md has the
// figures). Default: DefaultProxyRetention. WithProxyRetention panics if d is
// under two hours.
func WithProxyRetention(d time.Duration) ProxyOption {
	if d < minProxyRetention {
		panic(fmt.Sprintf("correctness: WithProxyRetention(%v): under %v", d, minProxyRetention))
	}
	return func(p *FencingProxy) { p.keep = d }
}

// DefaultProxyLimit is the number of resources a FencingProxy keeps in
// memory unless WithProxyLimit sets another.
const DefaultProxyLimit = 10_000

// WithProxyLimit sets how many resources the proxy keeps in memory, besides
// those with requests under way. Each costs about 300 bytes, whatever the
// length of its name (the default, about 3 MB). Past the limit the proxy
// forgets the resource used least recently. A forgotten resource never lets an
// older token through: with WithProxyStore, Redis still holds its highest
// token; without, the proxy remembers the highest token of the resources it
// forgot, in one of 1024 floors by the resource's name, and holds a resource it
// sees again to its floor. A current holder whose token is below that floor
// gets 409, and must acquire again to get a newer token. That works with the
// clock floor on (the default), whose tokens follow the server's clock; with
// WithClockFloor(false) tokens count the grants of each lock, and a quiet
// lock's tokens can stay below a floor that a busy lock's raised for a long
// time: use WithProxyStore with WithClockFloor(false) then, or a limit above
// the number of resources. Default: DefaultProxyLimit; n < 1 means the default.
func WithProxyLimit(n int) ProxyOption {
	return func(p *FencingProxy) {
		if n >= 1 {
			p.limit = n
		}
	}
}

// DefaultBackendTimeout is how long a FencingProxy lets the protected
// handler work on a request, unless WithBackendTimeout sets another.
const DefaultBackendTimeout = 30 * time.Second

// WithBackendTimeout sets how long the protected handler may work on a
// request the proxy forwarded, its response included, while the proxy keeps
// the request's resource locked. The handler's context ends after d, not
// when the client goes away: had the proxy freed the resource when the
// client left, a newer token could reach the backend while it still applied
// the older one. When d runs out, a ReverseProxy closes its connection to
// the backend and returns; the resource is then free. A backend that hangs
// holds its resource that long, and the requests for it wait, each until
// its own context ends (503). d bounds the whole exchange, an upgraded
// connection (WebSocket) too: set it above the longest a backend takes to
// answer and send its response. Default: DefaultBackendTimeout.
// WithBackendTimeout panics if d is not positive.
func WithBackendTimeout(d time.Duration) ProxyOption {
	if d <= 0 {
		panic(fmt.Sprintf("correctness: WithBackendTimeout(%v): not positive", d))
	}
	return func(p *FencingProxy) { p.bound = d }
}

// NewFencingProxy returns a FencingProxy in front of next. A nil next answers
// every accepted request with 502 Bad Gateway.
func NewFencingProxy(next http.Handler, opts ...ProxyOption) *FencingProxy {
	p := &FencingProxy{next: next, resource: pathResource, limit: DefaultProxyLimit, keep: DefaultProxyRetention, bound: DefaultBackendTimeout, fences: make(map[string]*fence)}
	for _, opt := range opts {
		if opt != nil {
			opt(p)
		}
	}
	return p
}

func (p *FencingProxy) rejected(ctx context.Context, reason string) {
	tel := p.tel
	if tel == nil {
		tel = fenceTelemetry()
	}
	tel.Rejected(ctx, "http", reason)
}

func pathResource(r *http.Request) string {
	if r.URL == nil || r.URL.Path == "" {
		return ""
	}
	return path.Clean("/" + r.URL.Path)
}

// ServeHTTP forwards r to the protected handler if its Fencing-Token is at
// least the highest token forwarded for its resource, and records it as the
// highest. Otherwise it answers without forwarding: 400 Bad Request for a
// missing, repeated, malformed or zero token, a token beyond the clock
// ceiling (with WithProxyStore), or an empty resource name; 409 Conflict,
// with a body naming both tokens, for an older token; 503 Service
// Unavailable when the request's context ends while it waits for its
// resource, or the store cannot be reached; 500 Internal Server Error when
// the store's key for the resource holds a field that is no token. A
// forwarded request's context ends at the bound of WithBackendTimeout, not
// when the client goes away (see FencingProxy).
func (p *FencingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, err := requestToken(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resource := p.resource(r)
	if resource == "" {
		http.Error(w, "correctness: fencing proxy: request names no resource", http.StatusBadRequest)
		return
	}
	f := p.fence(resource)
	defer p.done(f)
	if !f.take(r.Context()) {
		http.Error(w, "correctness: fencing proxy: gave up waiting for the resource", http.StatusServiceUnavailable)
		return
	}
	// Deferred: a handler may panic (ReverseProxy does, with
	// http.ErrAbortHandler), and the resource must not stay locked.
	defer func() { <-f.lock }()

	if status, err := p.check(r.Context(), f, resource, token); err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	f.highest.Store(token)
	f.floored = false
	if p.next == nil {
		http.Error(w, "correctness: fencing proxy: no backend", http.StatusBadGateway)
		return
	}
	// Until the backend has answered, the next token must not reach it,
	// whatever the client does: the client's cancellation must not end
	// the forwarded request, nor a failed write to the client end the
	// handler (see clientWriter). Only the bound does.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.bound)
	defer cancel()
	forwarded := r.WithContext(ctx)
	// A body of known length ends at its last byte. Else a ReverseProxy
	// looks for its end once more after the backend has read it, and if
	// the backend has answered by then, the HTTP/1 server has closed the
	// body for the response: the ReverseProxy fails, closes its connection
	// to the backend and aborts the response.
	if r.Body != nil && r.ContentLength > 0 {
		forwarded.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(r.Body, r.ContentLength), r.Body}
	}
	p.next.ServeHTTP(&clientWriter{ResponseWriter: w}, forwarded)
}

// take waits for f's lock until ctx ends, and reports whether it got it:
// never once ctx has ended, though the lock was free too, since a request
// forwarded now would run to its end for a client that gave up.
func (f *fence) take(ctx context.Context) bool {
	select {
	case f.lock <- struct{}{}:
		if ctx.Err() == nil {
			return true
		}
		<-f.lock
	case <-ctx.Done():
	}
	return false
}

// clientWriter is the ResponseWriter the protected handler writes to. Once
// a write or flush to the client fails (the client went away), it reports
// success and discards the rest, so that the handler runs to its end:
// ReverseProxy would otherwise abort with http.ErrAbortHandler and close
// the backend's response while the backend may still work on the request.
// For the same reason it has no CloseNotify. http.ResponseController
// reaches the client's writer through Unwrap (Hijack, deadlines).
type clientWriter struct {
	http.ResponseWriter
	gone bool // a write or flush to the client failed
}

// Write writes b to the client, or discards it once the client has gone.
func (w *clientWriter) Write(b []byte) (int, error) {
	if !w.gone {
		_, err := w.ResponseWriter.Write(b)
		w.gone = err != nil
	}
	return len(b), nil
}

// FlushError flushes what was written to the client, and reports success
// once the client has gone. A client's writer that cannot flush reports
// http.ErrNotSupported, as through http.ResponseController.
func (w *clientWriter) FlushError() error {
	if w.gone {
		return nil
	}
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		w.gone = true
		return nil
	}
	return err
}

// Flush is FlushError for http.Flusher, which reports no error.
func (w *clientWriter) Flush() { _ = w.FlushError() }

// Unwrap returns the client's writer, for http.ResponseController.
func (w *clientWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// check decides, under f's lock, whether token may pass for resource, and
// returns the status and error of a refusal.
func (p *FencingProxy) check(ctx context.Context, f *fence, resource string, token uint64) (int, error) {
	var err error
	if highest := f.highest.Load(); token < highest && f.floored {
		err = fmt.Errorf("%w: the proxy forgot %s or never saw it, and holds it to the highest token of the resources it forgot that share its floor (see WithProxyLimit)",
			&StaleTokenError{Token: token, Highest: highest}, lease.Quote(resource))
	} else if token < highest {
		err = &StaleTokenError{Token: token, Highest: highest}
	} else if p.store != nil {
		if err = checkFence(resource, token); err != nil {
			return http.StatusBadRequest, err
		}
		key := scripts.LockKey(p.store.prefix, resource) + ":proxy"
		_, err = p.store.fence(ctx, registerClaim, "fencing proxy claim of", key, resource, token, p.store.check, p.keep.Milliseconds())
	}
	switch rejection(err) {
	case "":
		switch {
		case err == nil:
			return 0, nil
		case errors.Is(err, ErrInvalidToken): // the store's key holds no token
			return http.StatusInternalServerError, err
		}
		return http.StatusServiceUnavailable, err
	case "ahead":
		p.rejected(ctx, "ahead")
		return http.StatusBadRequest, err
	}
	// Spare the store the next one. (Not a clock floor's refusal: that
	// floor names no token forwarded for the resource.)
	if stale, ok := err.(*StaleTokenError); ok {
		f.highest.Store(max(f.highest.Load(), stale.Highest))
	}
	p.rejected(ctx, "stale")
	return http.StatusConflict, err
}

// Highest returns the lowest token the proxy's memory now lets through for
// resource (a name as WithResource's function returns it; by default a
// cleaned path such as "/ledger"): the highest it has forwarded for it since
// it started, or, for a resource it forgot or never saw, the floor it holds
// it to (0 with WithProxyStore, whose Redis holds more). It does not wait
// for a request being served.
func (p *FencingProxy) Highest(resource string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.fences[memoName(resource)]; f != nil {
		return f.highest.Load()
	}
	return p.floor(memoName(resource))
}

// fence returns the state of resource, counting the caller among its users
// until done.
func (p *FencingProxy) fence(resource string) *fence {
	name := memoName(resource)
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fences[name]
	if f == nil {
		f = &fence{lock: make(chan struct{}, 1), name: name}
		f.highest.Store(p.floor(name))
		f.floored = f.highest.Load() > 0
		p.fences[name] = f
	} else if f.elem != nil {
		p.idle.Remove(f.elem)
		f.elem = nil
	}
	f.users++
	p.trim()
	return f
}

// done ends a user's turn with f, which becomes idle when it was the last.
func (p *FencingProxy) done(f *fence) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.users--; f.users == 0 {
		f.elem = p.idle.PushFront(f)
		p.trim()
	}
}

// trim forgets the least recently used idle resources beyond the limit;
// without a store, the highest token of each lifts its floor. Under p.mu.
func (p *FencingProxy) trim() {
	for len(p.fences) > p.limit && p.idle.Len() > 0 {
		f := p.idle.Remove(p.idle.Back()).(*fence)
		delete(p.fences, f.name)
		if p.store == nil {
			b := bucket(f.name)
			p.floors[b] = max(p.floors[b], f.highest.Load())
		}
	}
}

// floor is the lowest token the proxy lets through, from memory, for a
// resource it does not hold. Under p.mu.
func (p *FencingProxy) floor(name string) uint64 {
	if p.store != nil {
		return 0
	}
	return p.floors[bucket(name)]
}

func bucket(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % floorBuckets)
}

// memoName is the name under which the proxy remembers resource: itself, or
// for a long one its SHA-256, so that memory per resource is bounded.
func memoName(resource string) string {
	if len(resource) <= sha256.Size*2 {
		return resource
	}
	sum := sha256.Sum256([]byte(resource))
	return string(sum[:])
}

// requestToken parses the request's one Fencing-Token. Two values are refused
// rather than picking one: the client and a backend could pick differently.
func requestToken(r *http.Request) (uint64, error) {
	values := r.Header.Values(TokenHeader)
	switch len(values) {
	case 0:
		return 0, fmt.Errorf("%w: missing %s header", ErrInvalidToken, TokenHeader)
	case 1:
	default:
		return 0, fmt.Errorf("%w: %d %s headers, want one", ErrInvalidToken, len(values), TokenHeader)
	}
	token, err := strconv.ParseUint(values[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a decimal uint64", ErrInvalidToken, TokenHeader, values[0])
	}
	if token == 0 {
		return 0, fmt.Errorf("%w: %s 0 is no grant's token", ErrInvalidToken, TokenHeader)
	}
	return token, nil
}
