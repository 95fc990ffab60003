package correctness

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/leasekit/leasekit/internal/telemetry"
	"go.opentelemetry.io/otel/metric"
)

// TokenHeader is the request header that carries the writer's fencing token,
// in decimal.
const TokenHeader = "Fencing-Token"

// FencingProxy is an http.Handler that fences a resource which cannot check
// tokens itself: it forwards a request to the protected handler only when the
// request's Fencing-Token is at least the highest token it has forwarded for
// the request's resource.
//
// For each resource, checking the token, recording it as the highest and
// serving the request happen under one lock, so the backend sees a resource's
// requests in token order: a request with token 33 that passed the check can
// never reach the backend after one with token 34. The price is that requests
// for one resource are served one at a time; different resources do not wait
// for each other. A request waiting for its resource gives up when its context
// ends, with 503 Service Unavailable.
//
// The highest tokens live in the proxy's memory, one entry per resource ever
// seen, and are never forgotten, since forgetting one would let an older
// token through. So the proxy fences only if it is the only path to the
// resource: one proxy, one process, every write through it. Every request it
// receives needs a token, reads included; route reads, which need no fence,
// around it if they should not queue behind writes. A restarted proxy
// starts from 0 for every resource, so the first token it sees for a resource
// is accepted however old it is: until the current holder has written again,
// a paused, superseded holder can get through. After a restart, have each
// current holder write (or send a no-op request) with its token first.
//
// To fence a remote service, make next a reverse proxy to it:
//
//	backend, _ := url.Parse("http://ledger.internal:8080")
//	proxy := correctness.NewFencingProxy(httputil.NewSingleHostReverseProxy(backend))
//	log.Fatal(http.ListenAndServe(":8080", proxy))
type FencingProxy struct {
	next     http.Handler
	resource func(*http.Request) string

	tel *telemetry.Telemetry // nil: fenceTelemetry's

	mu     sync.Mutex
	fences map[string]*fence
}

// fence is the state of one resource. The channel is its lock, with room for
// one holder, so that a waiting request can give up when its context ends.
type fence struct {
	lock chan struct{}
	// highest changes only under lock; it is atomic so that Highest can read
	// it without waiting for the request being served.
	highest atomic.Uint64
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

// WithProxyMeterProvider sets where the proxy counts the requests it rejects
// for an older token (leasekit.fence.rejections). Default: the global
// provider.
func WithProxyMeterProvider(mp metric.MeterProvider) ProxyOption {
	return func(p *FencingProxy) {
		p.tel = telemetry.New(telemetry.Config{Kind: "correctness", MeterProvider: mp})
	}
}

// NewFencingProxy returns a FencingProxy in front of next. A nil next answers
// every accepted request with 502 Bad Gateway.
func NewFencingProxy(next http.Handler, opts ...ProxyOption) *FencingProxy {
	p := &FencingProxy{next: next, resource: pathResource, fences: make(map[string]*fence)}
	for _, opt := range opts {
		if opt != nil {
			opt(p)
		}
	}
	return p
}

func (p *FencingProxy) rejected(ctx context.Context) {
	tel := p.tel
	if tel == nil {
		tel = fenceTelemetry()
	}
	tel.Rejected(ctx, "http")
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
// missing, repeated, malformed or zero token, or an empty resource name; 409
// Conflict, with a body naming both tokens, for an older token.
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
	select {
	case f.lock <- struct{}{}:
	case <-r.Context().Done():
		http.Error(w, "correctness: fencing proxy: gave up waiting for the resource", http.StatusServiceUnavailable)
		return
	}
	// Deferred: a handler may panic (ReverseProxy does, with
	// http.ErrAbortHandler), and the resource must not stay locked.
	defer func() { <-f.lock }()

	if highest := f.highest.Load(); token < highest {
		err := &StaleTokenError{Token: token, Highest: highest}
		p.rejected(r.Context())
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	f.highest.Store(token)
	if p.next == nil {
		http.Error(w, "correctness: fencing proxy: no backend", http.StatusBadGateway)
		return
	}
	p.next.ServeHTTP(w, r)
}

// Highest returns the highest token the proxy has forwarded for resource (a
// name as WithResource's function returns it; by default a cleaned path such
// as "/ledger"), or 0 if it has forwarded none since it started. It does not
// wait for a request being served.
func (p *FencingProxy) Highest(resource string) uint64 {
	p.mu.Lock()
	f := p.fences[resource]
	p.mu.Unlock()
	if f == nil {
		return 0
	}
	return f.highest.Load()
}

func (p *FencingProxy) fence(resource string) *fence {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fences[resource]
	if f == nil {
		f = &fence{lock: make(chan struct{}, 1)}
		p.fences[resource] = f
	}
	return f
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
