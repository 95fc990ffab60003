package correctness

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// brokenClient is the writer of a client that went away: every write and
// flush fails. It counts them, and takes write deadlines.
type brokenClient struct {
	header          http.Header
	writes, flushes int
	deadline        time.Time
}

func (c *brokenClient) Header() http.Header { return c.header }
func (c *brokenClient) WriteHeader(int)     {}
func (c *brokenClient) Write([]byte) (int, error) {
	c.writes++
	return 0, errors.New("broken pipe")
}
func (c *brokenClient) FlushError() error {
	c.flushes++
	return errors.New("broken pipe")
}
func (c *brokenClient) SetWriteDeadline(d time.Time) error {
	c.deadline = d
	return nil
}

// TestClientWriterOutlivesTheClient: once a write or a flush to the client
// fails, the protected handler's writes and flushes succeed and reach the
// client no more; http.ResponseController still reaches the client's
// writer.
func TestClientWriterOutlivesTheClient(t *testing.T) {
	tests := []struct {
		name  string
		first func(w *clientWriter) error // fails at the client
	}{
		{"write fails", func(w *clientWriter) error { _, err := w.Write([]byte("a")); return err }},
		{"flush fails", func(w *clientWriter) error { return http.NewResponseController(w).Flush() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &brokenClient{header: http.Header{}}
			w := &clientWriter{ResponseWriter: client}
			if err := tt.first(w); err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			before := client.writes + client.flushes
			if n, err := w.Write([]byte("bc")); n != 2 || err != nil {
				t.Errorf("a write after: got %d, %v, want 2, nil", n, err)
			}
			w.Flush()
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("a flush after: got %v, want nil", err)
			}
			if got := client.writes + client.flushes; got != before {
				t.Errorf("got %d writes and flushes at the client, want %d", got, before)
			}
			deadline := time.Unix(1, 0)
			if err := http.NewResponseController(w).SetWriteDeadline(deadline); err != nil || !client.deadline.Equal(deadline) {
				t.Errorf("SetWriteDeadline: got %v and the client's deadline %v, want nil and %v", err, client.deadline, deadline)
			}
		})
	}
}

// TestClientWriterCannotFlush: a client's writer that cannot flush says
// so through the clientWriter, as it would without.
func TestClientWriterCannotFlush(t *testing.T) {
	w := &clientWriter{ResponseWriter: struct{ http.ResponseWriter }{httptest.NewRecorder()}}
	if err := http.NewResponseController(w).Flush(); !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("got %v, want %v", err, http.ErrNotSupported)
	}
	if n, err := w.Write([]byte("a")); n != 1 || err != nil {
		t.Errorf("got %d, %v, want 1, nil", n, err)
	}
}
