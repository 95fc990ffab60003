package correctness_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// backendLog is a protected handler that records, in the order it served
// them, the tokens of the requests that reached it.
type backendLog struct {
	mu     sync.Mutex
	tokens []uint64
}

func (b *backendLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, err := strconv.ParseUint(r.Header.Get(correctness.TokenHeader), 10, 64)
	if err != nil {
		// The proxy let through a token it should have refused.
		http.Error(w, "backend: "+err.Error(), http.StatusTeapot)
		return
	}
	b.mu.Lock()
	b.tokens = append(b.tokens, token)
	b.mu.Unlock()
	fmt.Fprintf(w, "served %d", token)
}

func (b *backendLog) served() []uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.tokens)
}

// fencedRequest builds a request for path with token as its Fencing-Token;
// an empty token sends no header.
func fencedRequest(ctx context.Context, path, token string) *http.Request {
	r := httptest.NewRequestWithContext(ctx, http.MethodPut, path, strings.NewReader("value"))
	if token != "" {
		r.Header.Set(correctness.TokenHeader, token)
	}
	return r
}

func serve(h http.Handler, r *http.Request) (status int, body string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestFencingProxySequence(t *testing.T) {
	backend := &backendLog{}
	proxy := correctness.NewFencingProxy(backend)

	// Each step runs against the state the previous steps left behind.
	steps := []struct {
		name        string
		token       string
		wantStatus  int
		wantBody    []string // substrings
		wantHighest uint64
	}{
		{name: "first token", token: "33", wantStatus: http.StatusOK, wantBody: []string{"served 33"}, wantHighest: 33},
		{name: "equal token", token: "33", wantStatus: http.StatusOK, wantBody: []string{"served 33"}, wantHighest: 33},
		{name: "newer token", token: "34", wantStatus: http.StatusOK, wantBody: []string{"served 34"}, wantHighest: 34},
		{name: "older token", token: "33", wantStatus: http.StatusConflict, wantBody: []string{"33", "34", "stale"}, wantHighest: 34},
		{name: "much older token", token: "1", wantStatus: http.StatusConflict, wantBody: []string{"1", "34"}, wantHighest: 34},
		{name: "largest token", token: "18446744073709551615", wantStatus: http.StatusOK, wantHighest: 1<<64 - 1},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			status, body := serve(proxy, fencedRequest(t.Context(), "/ledger", s.token))
			if status != s.wantStatus {
				t.Errorf("got status %d, want %d (body %q)", status, s.wantStatus, body)
			}
			for _, want := range s.wantBody {
				if !strings.Contains(body, want) {
					t.Errorf("got body %q, want it to contain %q", body, want)
				}
			}
			if got := proxy.Highest("/ledger"); got != s.wantHighest {
				t.Errorf("got Highest %d, want %d", got, s.wantHighest)
			}
		})
	}
	want := []uint64{33, 33, 34, 1<<64 - 1}
	if got := backend.served(); !slices.Equal(got, want) {
		t.Errorf("backend served %v, want %v", got, want)
	}
}

func TestFencingProxyBadToken(t *testing.T) {
	tests := []struct {
		name   string
		header []string // values of Fencing-Token
	}{
		{name: "missing"},
		{name: "empty", header: []string{""}},
		{name: "zero", header: []string{"0"}},
		{name: "zeros", header: []string{"000"}},
		{name: "negative", header: []string{"-1"}},
		{name: "plus sign", header: []string{"+5"}},
		{name: "fraction", header: []string{"1.5"}},
		{name: "hex", header: []string{"0x10"}},
		{name: "garbage", header: []string{"abc"}},
		{name: "spaces", header: []string{" 5 "}},
		{name: "overflow", header: []string{"18446744073709551616"}},
		{name: "two values", header: []string{"40", "41"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend := &backendLog{}
			proxy := correctness.NewFencingProxy(backend)
			r := fencedRequest(t.Context(), "/ledger", "")
			for _, v := range tt.header {
				r.Header.Add(correctness.TokenHeader, v)
			}
			status, body := serve(proxy, r)
			if status != http.StatusBadRequest {
				t.Errorf("got status %d, want %d (body %q)", status, http.StatusBadRequest, body)
			}
			if got := backend.served(); len(got) != 0 {
				t.Errorf("backend served %v, want nothing", got)
			}
			if got := proxy.Highest("/ledger"); got != 0 {
				t.Errorf("got Highest %d, want 0", got)
			}
		})
	}
}

func TestFencingProxyResource(t *testing.T) {
	byQuery := correctness.WithResource(func(r *http.Request) string { return r.URL.Query().Get("id") })
	tests := []struct {
		name       string
		opts       []correctness.ProxyOption
		first      string // path written with token 10
		second     string // path then written with token 1
		wantStatus int    // of the second write
	}{
		{name: "other path", first: "/a", second: "/b", wantStatus: http.StatusOK},
		{name: "same path", first: "/a", second: "/a", wantStatus: http.StatusConflict},
		{name: "same path after cleaning", first: "/a/b", second: "/a/x/../b", wantStatus: http.StatusConflict},
		{name: "same path, other query", first: "/a?id=1", second: "/a?id=2", wantStatus: http.StatusConflict},
		{name: "WithResource, other id", opts: []correctness.ProxyOption{byQuery}, first: "/a?id=1", second: "/a?id=2", wantStatus: http.StatusOK},
		{name: "WithResource, same id", opts: []correctness.ProxyOption{byQuery}, first: "/a?id=1", second: "/b?id=1", wantStatus: http.StatusConflict},
		{name: "WithResource, no id", opts: []correctness.ProxyOption{byQuery}, first: "/a?id=1", second: "/a", wantStatus: http.StatusBadRequest},
		{name: "WithResource(nil) keeps the path", opts: []correctness.ProxyOption{correctness.WithResource(nil), nil}, first: "/a", second: "/b", wantStatus: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := correctness.NewFencingProxy(&backendLog{}, tt.opts...)
			if status, body := serve(proxy, fencedRequest(t.Context(), tt.first, "10")); status != http.StatusOK {
				t.Fatalf("first write: got status %d, want %d (body %q)", status, http.StatusOK, body)
			}
			status, body := serve(proxy, fencedRequest(t.Context(), tt.second, "1"))
			if status != tt.wantStatus {
				t.Errorf("second write: got status %d, want %d (body %q)", status, tt.wantStatus, body)
			}
		})
	}
}

// TestFencingProxyResourcesDoNotWait holds a request for /a inside the
// backend until a request for /b has been served: if /b waited for /a, the
// test would never finish.
func TestFencingProxyResourcesDoNotWait(t *testing.T) {
	inA := make(chan struct{})
	bServed := make(chan struct{})
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			close(inA)
			<-bServed
		}
	})
	proxy := correctness.NewFencingProxy(backend)

	aStatus := make(chan int, 1)
	go func() {
		status, _ := serve(proxy, fencedRequest(t.Context(), "/a", "10"))
		aStatus <- status
	}()
	<-inA
	status, body := serve(proxy, fencedRequest(t.Context(), "/b", "1"))
	close(bServed)
	if status != http.StatusOK {
		t.Errorf("/b: got status %d, want %d (body %q)", status, http.StatusOK, body)
	}
	if got := <-aStatus; got != http.StatusOK {
		t.Errorf("/a: got status %d, want %d", got, http.StatusOK)
	}
}

// TestFencingProxyWaitCanceled shows that a request queued behind a busy
// resource gives up when its context ends, and never reaches the backend.
func TestFencingProxyWaitCanceled(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	backend := &backendLog{}
	blocking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(correctness.TokenHeader) == "5" {
			close(entered)
			<-release
		}
		backend.ServeHTTP(w, r)
	})
	proxy := correctness.NewFencingProxy(blocking)

	first := make(chan int, 1)
	go func() {
		status, _ := serve(proxy, fencedRequest(t.Context(), "/a", "5"))
		first <- status
	}()
	<-entered
	// The resource is held, so the only way out for this request is its
	// context, which has already ended.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	status, body := serve(proxy, fencedRequest(ctx, "/a", "6"))
	close(release)
	if status != http.StatusServiceUnavailable {
		t.Errorf("got status %d, want %d (body %q)", status, http.StatusServiceUnavailable, body)
	}
	if got := <-first; got != http.StatusOK {
		t.Errorf("first request: got status %d, want %d", got, http.StatusOK)
	}
	if got, want := backend.served(), []uint64{5}; !slices.Equal(got, want) {
		t.Errorf("backend served %v, want %v", got, want)
	}
	if got := proxy.Highest("/a"); got != 5 {
		t.Errorf("got Highest %d, want 5", got)
	}
}

// TestFencingProxyDoesNotForwardAGoneClient: a request whose context has
// ended by the time its resource is free is not forwarded, though the
// resource is free: the backend would run it to its end for nobody.
func TestFencingProxyDoesNotForwardAGoneClient(t *testing.T) {
	backend := &backendLog{}
	proxy := correctness.NewFencingProxy(backend)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 20 { // the lock's select would pick either at random
		if status, body := serve(proxy, fencedRequest(ctx, "/a", "5")); status != http.StatusServiceUnavailable {
			t.Fatalf("got status %d, want %d (body %q)", status, http.StatusServiceUnavailable, body)
		}
	}
	if got := backend.served(); len(got) != 0 {
		t.Errorf("backend served %v, want nothing", got)
	}
	if got := proxy.Highest("/a"); got != 0 {
		t.Errorf("got Highest %d, want 0", got)
	}
}

// TestFencingProxyPanicUnlocks shows that a backend that panics (as
// httputil.ReverseProxy does to abort a response) leaves the resource usable.
func TestFencingProxyPanicUnlocks(t *testing.T) {
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(correctness.TokenHeader) == "1" {
			panic(http.ErrAbortHandler)
		}
	})
	proxy := correctness.NewFencingProxy(backend)
	func() {
		defer func() {
			if got := recover(); got != http.ErrAbortHandler {
				t.Errorf("got panic %v, want %v", got, http.ErrAbortHandler)
			}
		}()
		serve(proxy, fencedRequest(t.Context(), "/a", "1"))
	}()
	if status, body := serve(proxy, fencedRequest(t.Context(), "/a", "2")); status != http.StatusOK {
		t.Errorf("got status %d, want %d (body %q)", status, http.StatusOK, body)
	}
}

func TestFencingProxyNilBackend(t *testing.T) {
	proxy := correctness.NewFencingProxy(nil)
	if status, body := serve(proxy, fencedRequest(t.Context(), "/a", "1")); status != http.StatusBadGateway {
		t.Errorf("got status %d, want %d (body %q)", status, http.StatusBadGateway, body)
	}
}

func TestFencingProxyConcurrentWriters(t *testing.T) {
	const writers = 32
	backend := &backendLog{}
	front := httptest.NewServer(correctness.NewFencingProxy(backend))
	t.Cleanup(front.Close)

	tokens := distinctTokens(writers)
	maxToken := slices.Max(tokens)

	type outcome struct {
		token  uint64
		status int
		err    error
	}
	start := make(chan struct{})
	results := make(chan outcome, writers)
	var wg sync.WaitGroup
	for _, token := range tokens {
		wg.Go(func() {
			<-start
			status, err := put(t.Context(), front.URL+"/ledger", token, "value")
			results <- outcome{token, status, err}
		})
	}
	close(start)
	wg.Wait()
	close(results)

	var accepted []uint64
	for r := range results {
		switch {
		case r.err != nil:
			t.Errorf("token %d: %v", r.token, r.err)
		case r.status == http.StatusOK:
			accepted = append(accepted, r.token)
		case r.status == http.StatusConflict:
			if r.token >= maxToken {
				t.Errorf("token %d rejected: got status %d, want %d as the highest of %v", r.token, r.status, http.StatusOK, tokens)
			}
		default:
			t.Errorf("token %d: got status %d, want %d or %d", r.token, r.status, http.StatusOK, http.StatusConflict)
		}
	}
	served := backend.served()
	if !slices.IsSorted(served) {
		t.Errorf("backend served %v, want a non-decreasing sequence", served)
	}
	if len(served) == 0 || served[len(served)-1] != maxToken {
		t.Errorf("backend served %v, want it to end with %d (the highest of %v)", served, maxToken, tokens)
	}
	slices.Sort(accepted)
	if got := slices.Sorted(slices.Values(served)); !slices.Equal(got, accepted) {
		t.Errorf("backend served %v, want the accepted tokens %v", got, accepted)
	}
}

// put sends a fenced PUT of body and drains the response, so the connection
// is reused.
func put(ctx context.Context, target string, token uint64, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, target, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set(correctness.TokenHeader, strconv.FormatUint(token, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// TestFencingProxyReverseProxy fences a remote service that knows nothing of
// tokens: the proxy fronts it through httputil.ReverseProxy.
func TestFencingProxyReverseProxy(t *testing.T) {
	remote := &backendLog{}
	remoteSrv := httptest.NewServer(remote)
	t.Cleanup(remoteSrv.Close)
	remoteURL, err := url.Parse(remoteSrv.URL)
	if err != nil {
		t.Fatalf("parse %q: %v", remoteSrv.URL, err)
	}
	front := httptest.NewServer(correctness.NewFencingProxy(httputil.NewSingleHostReverseProxy(remoteURL)))
	t.Cleanup(front.Close)

	steps := []struct {
		name       string
		token      uint64
		wantStatus int
	}{
		{name: "holder B", token: 34, wantStatus: http.StatusOK},
		{name: "paused holder A", token: 33, wantStatus: http.StatusConflict},
		{name: "holder B again", token: 34, wantStatus: http.StatusOK},
		{name: "holder C", token: 35, wantStatus: http.StatusOK},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			status, err := put(t.Context(), front.URL+"/ledger", s.token, "value")
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if status != s.wantStatus {
				t.Errorf("got status %d, want %d", status, s.wantStatus)
			}
		})
	}
	if got, want := remote.served(), []uint64{34, 34, 35}; !slices.Equal(got, want) {
		t.Errorf("remote served %v, want %v", got, want)
	}
}

// slowLedger is a remote service that takes work (about 400 ms) to apply a
// PUT, and applies what it started even if the caller goes away meanwhile,
// as many do. It works on requests concurrently, so that a later write can
// overtake one in progress, as a real service's varying latency lets it: to
// make the overtaking certain rather than a matter of scheduling, a PUT that
// arrives while another for its resource is in progress is applied at once.
// It records, per resource, the bodies in the order it applied them.
type slowLedger struct {
	work time.Duration

	mu        sync.Mutex
	busy      map[string]int           // resource: PUTs in progress
	overtakes int                      // PUTs that arrived while another was in progress
	applied   map[string][]string      // resource: bodies, in the order applied
	arrived   map[string]chan struct{} // resource: closed when a PUT arrives
}

func newSlowLedger(work time.Duration) *slowLedger {
	return &slowLedger{work: work, busy: map[string]int{}, applied: map[string][]string{}, arrived: map[string]chan struct{}{}}
}

func (l *slowLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "ledger: "+err.Error(), http.StatusBadRequest)
		return
	}
	resource := r.URL.Path
	l.mu.Lock()
	l.busy[resource]++
	overtakes := l.busy[resource] > 1
	if overtakes {
		l.overtakes++
	}
	if ch := l.arrival(resource); !isClosed(ch) {
		close(ch)
	}
	l.mu.Unlock()
	if !overtakes {
		time.Sleep(l.work)
	}
	l.mu.Lock()
	l.busy[resource]--
	l.applied[resource] = append(l.applied[resource], string(body))
	l.mu.Unlock()
	fmt.Fprintf(w, "applied %s", body)
}

// arrival returns the channel closed when the first PUT for resource
// arrives. Under l.mu.
func (l *slowLedger) arrival(resource string) chan struct{} {
	ch := l.arrived[resource]
	if ch == nil {
		ch = make(chan struct{})
		l.arrived[resource] = ch
	}
	return ch
}

func (l *slowLedger) arrivedAt(resource string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.arrival(resource)
}

func (l *slowLedger) overtaken() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.overtakes
}

func (l *slowLedger) appliedTo(resource string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.applied[resource])
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// reverseProxy returns the doc's recipe, httputil.NewSingleHostReverseProxy,
// to the server at target, logging nowhere: the errors it would log are
// what the tests provoke.
func reverseProxy(t *testing.T, target string) *httputil.ReverseProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("parse %q: %v", target, err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	return rp
}

// TestFencingProxyHoldsWhileTheBackendWorks is the paused holder at a slow
// backend: holder A's PUT reaches the backend, and 50 ms later A's request
// is cancelled (what Do does when the lease is lost, or a killed client);
// B, with the next token, PUTs right after. The backend must apply A before
// B, and end with B's value: the proxy keeps the resource until the backend
// has answered A, whatever happened to A's connection. Ten trials, each on
// a resource of its own, run at once; in memory and with the store.
func TestFencingProxyHoldsWhileTheBackendWorks(t *testing.T) {
	t.Run("memory", func(t *testing.T) { holdsWhileTheBackendWorks(t, 33) })
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		base := uint64(b.Client.Time(t.Context()).Val().UnixMicro())
		holdsWhileTheBackendWorks(t, base, correctness.WithProxyStore(b.Client))
	})
}

func holdsWhileTheBackendWorks(t *testing.T, base uint64, opts ...correctness.ProxyOption) {
	const trials = 10
	ledger := newSlowLedger(400 * time.Millisecond)
	backend := httptest.NewServer(ledger)
	t.Cleanup(backend.Close)
	front := httptest.NewServer(correctness.NewFencingProxy(reverseProxy(t, backend.URL), opts...))
	t.Cleanup(front.Close)

	errs := make(chan error, trials)
	var wg sync.WaitGroup
	for i := range trials {
		wg.Go(func() {
			resource := fmt.Sprintf("/ledger/%d", i)
			tokenA := base + uint64(2*i)
			if err := cancelledThenNext(t.Context(), front.URL+resource, ledger.arrivedAt(resource), tokenA); err != nil {
				errs <- fmt.Errorf("trial %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	backend.Close() // waits for the PUTs the backend is still applying

	inOrder := 0
	for i := range trials {
		resource := fmt.Sprintf("/ledger/%d", i)
		if got, want := ledger.appliedTo(resource), []string{"A", "B"}; !slices.Equal(got, want) {
			t.Errorf("trial %d: the backend applied %v, want %v (the final value B)", i, got, want)
			continue
		}
		inOrder++
	}
	t.Logf("A then B, final value B: %d of %d trials", inOrder, trials)
	if n := ledger.overtaken(); n != 0 {
		t.Errorf("the backend got %d PUTs while another for their resource was in progress, want 0", n)
	}
}

// cancelledThenNext PUTs "A" with tokenA to target, cancels it 50 ms after
// it reached the backend (arrived), then PUTs "B" with the next token.
func cancelledThenNext(ctx context.Context, target string, arrived <-chan struct{}, tokenA uint64) error {
	ctxA, cancel := context.WithCancel(ctx)
	defer cancel()
	doneA := make(chan error, 1)
	go func() {
		_, err := put(ctxA, target, tokenA, "A")
		doneA <- err
	}()
	select {
	case <-arrived:
	case err := <-doneA:
		return fmt.Errorf("A ended before it reached the backend: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-doneA; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("A: got %v, want %v", err, context.Canceled)
	}
	status, err := put(ctx, target, tokenA+1, "B")
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("B: got status %d, %v, want %d", status, err, http.StatusOK)
	}
	return nil
}

// TestFencingProxyBackendTimeout: a backend that never answers holds its
// resource until the bound (WithBackendTimeout) runs out, and no longer:
// then the proxy closes its connection to the backend and answers 502, and
// the request that waited for the resource is forwarded.
func TestFencingProxyBackendTimeout(t *testing.T) {
	arrived := make(chan struct{}) // the hanging request reached the backend
	closed := make(chan struct{})  // the backend saw its connection close
	stop := make(chan struct{})    // lets the backend go if the test fails
	served := &backendLog{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(correctness.TokenHeader) != "5" {
			served.ServeHTTP(w, r)
			return
		}
		// The server watches the connection, and ends r's context when it
		// closes, once the body has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		select {
		case <-r.Context().Done():
			close(closed)
		case <-stop:
		}
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() { close(stop) })
	proxy := correctness.NewFencingProxy(reverseProxy(t, backend.URL), correctness.WithBackendTimeout(100*time.Millisecond))
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	type outcome struct {
		status int
		err    error
	}
	hung := make(chan outcome, 1)
	go func() {
		status, err := put(t.Context(), front.URL+"/ledger", 5, "A")
		hung <- outcome{status, err}
	}()
	<-arrived
	// The resource is held by the hanging request: this one waits for the
	// bound, then reaches the backend.
	if status, err := put(t.Context(), front.URL+"/ledger", 6, "B"); err != nil || status != http.StatusOK {
		t.Errorf("the waiting request: got status %d, %v, want %d", status, err, http.StatusOK)
	}
	if got := <-hung; got.err != nil || got.status != http.StatusBadGateway {
		t.Errorf("the hanging request: got status %d, %v, want %d", got.status, got.err, http.StatusBadGateway)
	}
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("the backend's connection of the hanging request is still open")
	}
	if got, want := served.served(), []uint64{6}; !slices.Equal(got, want) {
		t.Errorf("backend served %v, want %v", got, want)
	}
}

// TestFencingProxyReadsAResponseToItsEnd: when the client goes away while
// the backend sends a long response, the proxy reads the rest and discards
// it, and keeps the resource until the backend is done: every write of the
// backend succeeds, and the next token reaches it only afterwards.
func TestFencingProxyReadsAResponseToItsEnd(t *testing.T) {
	const chunk, chunks = 32 << 10, 256 // 8 MB, more than sockets buffer
	gate := make(chan struct{})         // the client has gone
	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(correctness.TokenHeader) != "5" {
			record("next token arrived")
			return
		}
		// Read first, as a write does: a body the client cut short would
		// make the proxy close this connection (see FencingProxy).
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			record("body: " + err.Error())
		}
		_, _ = io.WriteString(w, "first chunk")
		_ = http.NewResponseController(w).Flush()
		<-gate
		failed, buf := 0, make([]byte, chunk)
		for range chunks {
			if _, err := w.Write(buf); err != nil {
				failed++
			}
		}
		record(fmt.Sprintf("response sent, %d of %d writes failed", failed, chunks))
	}))
	t.Cleanup(backend.Close)
	front := httptest.NewServer(correctness.NewFencingProxy(reverseProxy(t, backend.URL)))
	t.Cleanup(front.Close)

	ctx, cancel := context.WithCancel(t.Context())
	req := fencedRequest(ctx, front.URL+"/ledger", "5")
	req.RequestURI = ""
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		close(gate)
		t.Fatalf("the first request: %v", err)
	}
	cancel() // the client goes away after the response's first bytes
	resp.Body.Close()
	close(gate)
	if status, err := put(t.Context(), front.URL+"/ledger", 6, "B"); err != nil || status != http.StatusOK {
		t.Errorf("the next token: got status %d, %v, want %d", status, err, http.StatusOK)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{fmt.Sprintf("response sent, 0 of %d writes failed", chunks), "next token arrived"}; !slices.Equal(events, want) {
		t.Errorf("the backend saw %q, want %q", events, want)
	}
}

func ExampleFencingProxy() {
	// The protected handler knows nothing of tokens; for a remote service it
	// would be httputil.NewSingleHostReverseProxy(url).
	ledger := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "written")
	})
	proxy := correctness.NewFencingProxy(ledger)

	for _, token := range []string{"34", "33"} { // B writes, then paused A wakes up
		r := httptest.NewRequest(http.MethodPut, "/ledger/invoice-7", nil)
		r.Header.Set(correctness.TokenHeader, token)
		w := httptest.NewRecorder()
		proxy.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	// Output:
	// 200 written
	// 409 correctness: stale fencing token 33: 34 was accepted before
}

// TestFencingProxyReadsClaim is the read-modify-write story through the
// proxy: A reads with its token, B reads with a newer one; A's write is
// refused though B has not written yet.
func TestFencingProxyReadsClaim(t *testing.T) {
	backend := &backendLog{}
	proxy := correctness.NewFencingProxy(backend)
	steps := []struct {
		method, token string
		want          int
	}{
		{http.MethodGet, "33", http.StatusOK},       // A reads
		{http.MethodGet, "34", http.StatusOK},       // B reads
		{http.MethodPut, "33", http.StatusConflict}, // A writes back
		{http.MethodPut, "34", http.StatusOK},       // B writes back
	}
	for _, s := range steps {
		r := httptest.NewRequestWithContext(t.Context(), s.method, "/counter", nil)
		r.Header.Set(correctness.TokenHeader, s.token)
		if status, body := serve(proxy, r); status != s.want {
			t.Fatalf("%s with token %s: got status %d, want %d (body %q)", s.method, s.token, status, s.want, body)
		}
	}
	if got, want := backend.served(), []uint64{33, 34, 34}; !slices.Equal(got, want) {
		t.Errorf("backend served %v, want %v", got, want)
	}
}

// TestFencingProxyStoreSurvivesRestart restarts the proxy (a new
// FencingProxy on the same Redis) between holders: the new one still
// refuses the older token, whichever holder came first. Tokens are the
// clock floor's, base+33 and on, as the store expects.
func TestFencingProxyStoreSurvivesRestart(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		base := uint64(b.Client.Time(t.Context()).Val().UnixMicro())
		backend := &backendLog{}
		start := func() *correctness.FencingProxy {
			return correctness.NewFencingProxy(backend, correctness.WithProxyStore(b.Client))
		}
		steps := []struct {
			restart bool
			path    string
			method  string
			token   uint64 // past base
			want    int
		}{
			// A claims first; B claims after a restart, and A's write after
			// another is refused.
			{false, "/a-first", http.MethodGet, 33, http.StatusOK},
			{true, "/a-first", http.MethodGet, 34, http.StatusOK},
			{true, "/a-first", http.MethodPut, 33, http.StatusConflict},
			{false, "/a-first", http.MethodPut, 34, http.StatusOK},
			// B writes; after the restart, paused A is refused at once.
			{false, "/b-first", http.MethodPut, 34, http.StatusOK},
			{true, "/b-first", http.MethodPut, 33, http.StatusConflict},
			{false, "/b-first", http.MethodPut, 35, http.StatusOK},
		}
		proxy := start()
		for i, s := range steps {
			if s.restart {
				proxy = start()
			}
			r := httptest.NewRequestWithContext(t.Context(), s.method, s.path, nil)
			r.Header.Set(correctness.TokenHeader, strconv.FormatUint(base+s.token, 10))
			if status, body := serve(proxy, r); status != s.want {
				t.Fatalf("step %d, %s %s with token base+%d: got status %d, want %d (body %q)", i, s.method, s.path, s.token, status, s.want, body)
			}
		}
		want := []uint64{base + 33, base + 34, base + 34, base + 34, base + 35}
		if got := backend.served(); !slices.Equal(got, want) {
			t.Errorf("backend served %v, want %v", got, want)
		}
		if got, want := b.Client.HGet(t.Context(), "leasekit:{/b-first}:proxy", "claimed").Val(), strconv.FormatUint(base+35, 10); got != want {
			t.Errorf("store: got %q, want the highest token, %s, at leasekit:{/b-first}:proxy", got, want)
		}
	})
}

// TestFencingProxyStoreRefusesForgedTokens: with the store and the clock
// floor, a token more than an hour ahead of the Redis clock gets 400 and
// leaves honest holders working; without the store the proxy cannot tell.
func TestFencingProxyStoreRefusesForgedTokens(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		now := uint64(b.Client.Time(t.Context()).Val().UnixMicro())
		forged := strconv.FormatUint(now+uint64(2*time.Hour/time.Microsecond), 10)
		cases := []struct {
			name       string
			opts       []correctness.ProxyOption
			wantForged int
			wantAfter  int // an honest token, below the forged one, next
		}{
			{"store", []correctness.ProxyOption{correctness.WithProxyStore(b.Client)}, http.StatusBadRequest, http.StatusOK},
			{"store without the clock floor", []correctness.ProxyOption{correctness.WithProxyStore(b.Client, correctness.WithClockFloor(false), correctness.WithPrefix("open:"))}, http.StatusOK, http.StatusConflict},
			{"memory", nil, http.StatusOK, http.StatusConflict},
		}
		for _, tc := range cases {
			proxy := correctness.NewFencingProxy(&backendLog{}, tc.opts...)
			honest := strconv.FormatUint(now, 10)
			for _, step := range []struct {
				token string
				want  int
			}{{forged, tc.wantForged}, {"18446744073709551615", tc.wantForged}, {honest, tc.wantAfter}} {
				status, body := serve(proxy, fencedRequest(t.Context(), "/ledger", step.token))
				if status != step.want {
					t.Fatalf("%s, token %s: got status %d, want %d (body %q)", tc.name, step.token, status, step.want, body)
				}
				if status == http.StatusBadRequest && !strings.Contains(body, "more than an hour ahead") {
					t.Errorf("%s: got body %q, want it to name the clock ceiling", tc.name, body)
				}
			}
		}
	})
}

func TestFencingProxyStoreUnreachable(t *testing.T) {
	b := redistest.Mini(t)
	backend := &backendLog{}
	proxy := correctness.NewFencingProxy(backend, correctness.WithProxyStore(b.Client))
	b.Mini.Close()
	status, body := serve(proxy, fencedRequest(t.Context(), "/ledger", "5"))
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "leasekit:{/ledger}:proxy") {
		t.Errorf("got status %d (body %q), want %d naming the key", status, body, http.StatusServiceUnavailable)
	}
	if got := backend.served(); len(got) != 0 {
		t.Errorf("backend served %v, want nothing", got)
	}
}

// TestFencingProxyStoreExpiredKeyRefusesOldTokens: the store's key of a
// resource expires once no request has passed for it for the retention, and
// a proxy, even a new one, then still refuses every token older than one it
// forwarded: the clock floor holds the resource. On miniredis the retention
// goes by (Advance); a real server cannot wait hours, so there the tokens
// are a retention old already, and the key is expired with PEXPIRE 1.
func TestFencingProxyStoreExpiredKeyRefusesOldTokens(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		const keep = 3 * time.Hour
		const key = "leasekit:{/ledger}:proxy"
		backend := &backendLog{}
		start := func() *correctness.FencingProxy {
			return correctness.NewFencingProxy(backend, correctness.WithProxyStore(b.Client), correctness.WithProxyRetention(keep))
		}
		proxy := start()
		put := func(token uint64) (int, string) {
			return serve(proxy, fencedRequest(ctx, "/ledger", strconv.FormatUint(token, 10)))
		}
		highest := uint64(b.Client.Time(ctx).Val().UnixMicro()) // the highest forwarded
		if b.Real() {
			highest -= uint64((keep + time.Minute).Microseconds())
			b.Client.HSet(ctx, key, "claimed", highest-10) // as the store left it then
		}
		if status, body := put(highest); status != http.StatusOK {
			t.Fatalf("the highest token: got status %d, want %d (body %q)", status, http.StatusOK, body)
		}
		if ttl := b.Client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > keep {
			t.Fatalf("the key's PTTL: got %v, want the retention, %v", ttl, keep)
		}
		if b.Real() {
			b.Client.PExpire(ctx, key, time.Millisecond)
			for b.Client.Exists(ctx, key).Val() != 0 {
				time.Sleep(time.Millisecond)
			}
		} else {
			b.Advance(keep + time.Minute)
			if n := b.Client.Exists(ctx, key).Val(); n != 0 {
				t.Fatalf("the key outlived its retention")
			}
		}
		// A new proxy asks the store, which keeps only the floor; the one
		// that forwarded highest refuses older tokens from memory too.
		for i, p := range []*correctness.FencingProxy{start(), proxy} {
			for _, token := range []uint64{highest - 1, 1, highest} {
				status, body := serve(p, fencedRequest(ctx, "/ledger", strconv.FormatUint(token, 10)))
				if status != http.StatusConflict || i == 0 && (!strings.Contains(body, "clock floor") || !strings.Contains(body, key)) {
					t.Errorf("proxy %d, token %d after the key expired: got status %d (body %q), want %d", i, token, status, body, http.StatusConflict)
				}
			}
		}
		fresh := uint64(b.Client.Time(ctx).Val().UnixMicro())
		if status, body := put(fresh); status != http.StatusOK {
			t.Fatalf("a new lease's token: got status %d, want %d (body %q)", status, http.StatusOK, body)
		}
		if got, want := backend.served(), []uint64{highest, fresh}; !slices.Equal(got, want) {
			t.Errorf("backend served %v, want %v", got, want)
		}
	})
}

// TestFencingProxyStoreKeysExpire: with the clock floor, every key the store
// writes expires within the retention; without it (tokens that count
// grants) none does, and small tokens pass. Either way a request costs one
// round trip.
func TestFencingProxyStoreKeysExpire(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		now := uint64(b.Client.Time(ctx).Val().UnixMicro())
		cases := []struct {
			name  string
			opts  []correctness.ProxyOption
			first uint64
			keep  time.Duration // 0: no expiry
		}{
			{"default", []correctness.ProxyOption{correctness.WithProxyStore(b.Client)}, now, correctness.DefaultProxyRetention},
			{"retention", []correctness.ProxyOption{correctness.WithProxyStore(b.Client), correctness.WithProxyRetention(3 * time.Hour)}, now, 3 * time.Hour},
			{"counting tokens", []correctness.ProxyOption{correctness.WithProxyStore(b.Client, correctness.WithClockFloor(false))}, 1, 0},
		}
		count := redistest.Count(b.Client)
		for _, c := range cases {
			b.Client.FlushAll(ctx)
			proxy := correctness.NewFencingProxy(&backendLog{}, c.opts...)
			const n = 100
			for i := range n {
				if i == 1 {
					count.Reset() // the first may load the script
				}
				for range 2 { // the second: the same holder again
					if status, body := serve(proxy, fencedRequest(ctx, fmt.Sprintf("/r/%d", i), strconv.FormatUint(c.first+uint64(i), 10))); status != http.StatusOK {
						t.Fatalf("%s, resource %d: got status %d (body %q)", c.name, i, status, body)
					}
				}
			}
			if got, want := count.Total(), 2*(n-1); got != want || count.Of("register_claim") != want {
				t.Errorf("%s: %d round trips (%d register_claim) for %d requests, want one each", c.name, got, count.Of("register_claim"), want)
			}
			keys, err := b.Client.Keys(ctx, "*").Result()
			if err != nil || len(keys) != n {
				t.Fatalf("%s: got %d keys, %v, want %d", c.name, len(keys), err, n)
			}
			for _, k := range keys {
				ttl := b.Client.PTTL(ctx, k).Val()
				if c.keep > 0 && (ttl <= 0 || ttl > c.keep) || c.keep == 0 && ttl != -1 {
					t.Errorf("%s: %s has PTTL %v, want %v (-1ns: none)", c.name, k, ttl, cmp.Or(c.keep, -time.Nanosecond))
				}
			}
		}
	})
}

func TestProxyOptionsPanicOnBadValues(t *testing.T) {
	tests := []struct {
		name   string
		option func()
	}{
		{"WithProxyRetention", func() { correctness.WithProxyRetention(2*time.Hour - time.Millisecond) }},
		{"WithBackendTimeout", func() { correctness.WithBackendTimeout(0) }},
		{"WithBackendTimeout", func() { correctness.WithBackendTimeout(-time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tt.name) {
					t.Errorf("got panic %v, want one naming %s", r, tt.name)
				}
			}()
			tt.option()
		})
	}
}

// BenchmarkProxyStoreMemory sends each request for a new resource (a path
// like /ledger/invoice-12345) through a FencingProxy whose store is the real
// redis-server, and reports what the store costs Redis: memory per resource
// (growth of INFO used_memory), the keys it leaves without expiry, and the
// commands its script runs per request (INFO commandstats, EVALSHA left
// out); with the default retention, and with keys that never expire.
// docs/fencing.md has the figures of
//
//	LEASEKIT_REQUIRE_REDIS=1 go test -run '^$' -bench ProxyStoreMemory -benchtime 20000x ./correctness
func BenchmarkProxyStoreMemory(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []correctness.Option
	}{{"retention", nil}, {"no-expiry", []correctness.Option{correctness.WithClockFloor(false)}}} {
		b.Run(c.name, func(b *testing.B) {
			be := redistest.Real(b)
			ctx := b.Context()
			proxy := correctness.NewFencingProxy(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), correctness.WithProxyStore(be.Client, c.opts...))
			token := uint64(be.Client.Time(ctx).Val().UnixMicro())
			send := func(path string) {
				token++
				if status, body := serve(proxy, fencedRequest(ctx, path, strconv.FormatUint(token, 10))); status != http.StatusOK {
					b.Fatalf("%s: got status %d (body %q)", path, status, body)
				}
			}
			send("/warm") // loads the script
			if err := be.Client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			before := usedMemory(b, be)
			n := 0
			for b.Loop() {
				send(fmt.Sprintf("/ledger/invoice-%d", n))
				n++
			}
			b.ReportMetric(float64(usedMemory(b, be)-before)/float64(n), "used-B/resource")
			var commands float64
			for command, calls := range commandStat(b, be, "calls") {
				if command != "evalsha" && command != "config|resetstat" && command != "info" {
					commands += calls
				}
			}
			b.ReportMetric(commands/float64(n), "commands/request")
			var forever int
			iter := be.Client.Scan(ctx, 0, "*", 1000).Iterator()
			for iter.Next(ctx) {
				if be.Client.PTTL(ctx, iter.Val()).Val() < 0 {
					forever++
				}
			}
			if err := iter.Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(forever), "keys-without-expiry")
		})
	}
}

// usedMemory reads used_memory from INFO memory.
func usedMemory(b *testing.B, be *redistest.Backend) int64 {
	b.Helper()
	info, err := be.Client.Info(b.Context(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("INFO memory has no used_memory:\n%s", info)
	return 0
}

// TestFencingProxyStoreCorruptKey: a store key whose 'claimed' holds no
// token fails closed, with 500 naming the key, whatever the token.
func TestFencingProxyStoreCorruptKey(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		backend := &backendLog{}
		proxy := correctness.NewFencingProxy(backend, correctness.WithProxyStore(b.Client))
		const key = "leasekit:{/ledger}:proxy"
		b.Client.HSet(t.Context(), key, "claimed", "garbage")
		now := uint64(b.Client.Time(t.Context()).Val().UnixMicro())
		for _, token := range []uint64{5, now} {
			status, body := serve(proxy, fencedRequest(t.Context(), "/ledger", strconv.FormatUint(token, 10)))
			if status != http.StatusInternalServerError || !strings.Contains(body, key) || !strings.Contains(body, "claimed") {
				t.Errorf("token %d: got status %d (body %q), want %d naming the key and the field", token, status, body, http.StatusInternalServerError)
			}
		}
		if got := backend.served(); len(got) != 0 {
			t.Errorf("backend served %v, want nothing", got)
		}
		if got := b.Client.HGetAll(t.Context(), key).Val(); len(got) != 1 || got["claimed"] != "garbage" {
			t.Errorf("the store key is now %v", got)
		}
	})
}

// TestFencingProxyLimit: past its limit the proxy forgets the resource used
// least recently, and then holds it to the highest token it forgot: never
// an older token through. Other resources keep their own floor.
func TestFencingProxyLimit(t *testing.T) {
	proxy := correctness.NewFencingProxy(&backendLog{}, correctness.WithProxyLimit(2))
	steps := []struct {
		path, token string
		want        int
	}{
		{"/a", "50", http.StatusOK},
		{"/b", "10", http.StatusOK},
		{"/c", "20", http.StatusOK}, // /a is forgotten
		{"/a", "49", http.StatusConflict},
		{"/a", "50", http.StatusOK},
		{"/d", "1", http.StatusOK}, // a floor of its own
	}
	for _, s := range steps {
		if status, body := serve(proxy, fencedRequest(t.Context(), s.path, s.token)); status != s.want {
			t.Fatalf("%s with token %s: got status %d, want %d (body %q)", s.path, s.token, status, s.want, body)
		}
	}
	if got := proxy.Highest("/b"); got != 10 {
		t.Errorf("Highest of the forgotten /b: got %d, want its floor, 10", got)
	}
}

// TestFencingProxyFloorRefusalSaysSo: a resource the proxy never saw, whose
// floor another forgotten resource raised, gets 409 for a lower token with a
// body that says the floor refused it, not that a newer token was accepted
// for it; once a token at the floor passes, a lower one is refused as stale.
func TestFencingProxyFloorRefusalSaysSo(t *testing.T) {
	proxy := correctness.NewFencingProxy(&backendLog{}, correctness.WithProxyLimit(1))
	busy, quiet := "/orders", sameFloor(t, "/orders")
	for _, s := range []struct{ path, token string }{{busy, "300"}, {"/other", "1"}} { // busy is forgotten
		if status, body := serve(proxy, fencedRequest(t.Context(), s.path, s.token)); status != http.StatusOK {
			t.Fatalf("%s with token %s: got status %d (body %q)", s.path, s.token, status, body)
		}
	}
	status, body := serve(proxy, fencedRequest(t.Context(), quiet, "2"))
	if status != http.StatusConflict || !strings.Contains(body, "forgot") || !strings.Contains(body, "WithProxyLimit") {
		t.Fatalf("%s, never seen, token 2 under the floor 300: got %d %q, want 409 saying the floor refused it", quiet, status, body)
	}
	if status, body := serve(proxy, fencedRequest(t.Context(), quiet, "300")); status != http.StatusOK {
		t.Fatalf("%s with the floor's token: got %d %q, want 200", quiet, status, body)
	}
	status, body = serve(proxy, fencedRequest(t.Context(), quiet, "299"))
	if status != http.StatusConflict || strings.Contains(body, "forgot") {
		t.Fatalf("%s after 300 passed, token 299: got %d %q, want 409 as a plain stale token", quiet, status, body)
	}
}

// sameFloor returns a path other than name that shares its floor: the
// proxy's buckets are FNV-1a of the name, modulo 1024.
func sameFloor(t *testing.T, name string) string {
	bucket := func(s string) uint32 {
		h := fnv.New32a()
		h.Write([]byte(s))
		return h.Sum32() % 1024
	}
	for i := range 1 << 20 {
		if p := fmt.Sprintf("/users/%d", i); bucket(p) == bucket(name) {
			return p
		}
	}
	t.Fatal("no path shares the floor")
	return ""
}
