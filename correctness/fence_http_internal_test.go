package correctness

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func proxyRequest(t *testing.T, p *FencingProxy, path, token string) int {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
	r.Header.Set(TokenHeader, token)
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	return w.Code
}

// TestFencingProxyMemoryIsBounded sends 5,000 resources with 1 KB names
// through a proxy limited to 100: it holds at most 100, each under a name of
// at most 64 bytes, and a resource in use is never forgotten.
func TestFencingProxyMemoryIsBounded(t *testing.T) {
	inside, release := make(chan struct{}), make(chan struct{})
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			close(inside)
			<-release
		}
	})
	p := NewFencingProxy(backend, WithProxyLimit(100))
	busy := make(chan int, 1)
	go func() {
		r := httptest.NewRequest(http.MethodGet, "/busy", nil)
		r.Header.Set(TokenHeader, "7")
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		busy <- w.Code
	}()
	<-inside
	p.mu.Lock()
	held := p.fences["/busy"]
	p.mu.Unlock()

	long := strings.Repeat("x", 1024)
	for i := range 5000 {
		if code := proxyRequest(t, p, fmt.Sprintf("/%s/%d", long, i), "5"); code != http.StatusOK {
			t.Fatalf("resource %d: got status %d, want %d", i, code, http.StatusOK)
		}
	}
	p.mu.Lock()
	n, still := len(p.fences), p.fences["/busy"]
	for name := range p.fences {
		if len(name) > 64 {
			t.Errorf("a resource is kept under a name of %d bytes", len(name))
		}
	}
	p.mu.Unlock()
	if n > 100 {
		t.Errorf("got %d resources in memory, want at most the limit, 100", n)
	}
	if still != held {
		t.Errorf("the resource in use was forgotten: a second request could pass beside it")
	}
	close(release)
	if code := <-busy; code != http.StatusOK {
		t.Fatalf("/busy: got status %d", code)
	}
	p.mu.Lock()
	n = len(p.fences)
	p.mu.Unlock()
	if n > 100 {
		t.Errorf("after the request in use ended: got %d resources in memory, want at most 100", n)
	}
}
