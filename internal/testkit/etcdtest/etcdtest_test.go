package etcdtest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/etcdtest"
	"github.com/leasekit/leasekit/internal/testkit/leakcheck"
)

// TestMain fails the run if the harness leaves a goroutine behind: the
// reapers of killed and stopped members must all have ended.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

// TestKillLeaderElectsAnotherAndRestartRejoins kills the leader of a
// 3-member cluster: the two left elect one of themselves and take writes,
// and the killed member, restarted on its data dir, rejoins and serves what
// was written while it was down.
func TestKillLeaderElectsAnotherAndRestartRejoins(t *testing.T) {
	begin := time.Now()
	c := etcdtest.Start(t, 3)
	t.Logf("Start(3) took %v", time.Since(begin).Round(time.Millisecond))

	eps := c.Endpoints()
	if len(eps) != 3 || len(c.Members) != 3 {
		t.Fatalf("Endpoints() = %q for %d members, want 3 of each", eps, len(c.Members))
	}
	ids := map[uint64]bool{}
	for i, ep := range eps {
		if host, _, err := net.SplitHostPort(ep); err != nil || host != "127.0.0.1" {
			t.Fatalf("Endpoints()[%d] = %q, want 127.0.0.1:PORT", i, ep)
		}
		m := c.Members[i]
		if m.Endpoint != ep || !m.Running() || m.ID == 0 {
			t.Fatalf("member %d = %+v: want endpoint %s, running, with an ID", i, m, ep)
		}
		if st := status(t, ep); st.MemberID != m.ID {
			t.Fatalf("%s reports member_id %d, harness has %d", ep, st.MemberID, m.ID)
		}
		ids[m.ID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("member IDs %v are not distinct", ids)
	}

	old := c.Leader(t)
	oldID := c.Members[old].ID
	for _, ep := range eps {
		if st := status(t, ep); st.Leader != oldID {
			t.Fatalf("%s reports leader %d, Leader(t) found %d (member %d)", ep, st.Leader, oldID, old)
		}
	}
	put(t, eps[old], "before", "1")

	c.Kill(t, old)
	if c.Members[old].Running() {
		t.Fatalf("member %d still Running after Kill", old)
	}
	// Nothing listens on a killed member's client port.
	if conn, err := net.DialTimeout("tcp", eps[old], time.Second); err == nil {
		conn.Close()
		t.Fatalf("member %d (%s) still accepts connections after Kill", old, eps[old])
	}
	if err := health(eps[old]); err == nil {
		t.Fatalf("member %d (%s) still answers /health after Kill", old, eps[old])
	}

	next := c.Leader(t)
	if next == old {
		t.Fatalf("Leader(t) = %d, the killed member", old)
	}
	var follower int
	for i := range c.Members {
		if i != old && i != next {
			follower = i
		}
	}
	for _, i := range []int{next, follower} {
		if st := status(t, eps[i]); st.Leader != c.Members[next].ID {
			t.Fatalf("member %d reports leader %d, want member %d's ID %d", i, st.Leader, next, c.Members[next].ID)
		}
	}
	// Two of three are a quorum: a write through the follower commits, and
	// the new leader serves it and the write from before the kill.
	put(t, eps[follower], "after", "2")
	for key, want := range map[string]string{"before": "1", "after": "2"} {
		if got := get(t, eps[next], key); got != want {
			t.Fatalf("get %q on the new leader = %q, want %q", key, got, want)
		}
	}

	c.Restart(t, old)
	if !c.Members[old].Running() {
		t.Fatalf("member %d not Running after Restart", old)
	}
	if err := health(eps[old]); err != nil {
		t.Fatalf("restarted member %d: %v", old, err)
	}
	leader := c.Leader(t)
	st := status(t, eps[old])
	if st.MemberID != oldID {
		t.Fatalf("restarted member %d has member_id %d, want its old %d", old, st.MemberID, oldID)
	}
	if st.Leader != c.Members[leader].ID {
		t.Fatalf("restarted member %d reports leader %d, want member %d's ID %d", old, st.Leader, leader, c.Members[leader].ID)
	}
	// A linearizable read through the restarted member: it has caught up.
	if got := get(t, eps[old], "after"); got != "2" {
		t.Fatalf("get \"after\" on the restarted member = %q, want \"2\"", got)
	}
	put(t, eps[old], "rejoined", "3")
	if got := get(t, eps[follower], "rejoined"); got != "3" {
		t.Fatalf("get \"rejoined\" = %q, want \"3\"", got)
	}
}

// TestShared: Shared's endpoints are healthy, and it reads them back from
// LEASEKIT_ETCD_ENDPOINTS, spaces and empty items aside.
func TestShared(t *testing.T) {
	eps := etcdtest.Shared(t)
	if len(eps) == 0 {
		t.Fatal("Shared returned no endpoint")
	}
	for _, ep := range eps {
		if err := health(ep); err != nil {
			t.Fatalf("Shared endpoint: %v", err)
		}
	}
	t.Setenv(etcdtest.EndpointsEnv, " "+strings.Join(eps, " , ")+", ")
	if got := etcdtest.Shared(t); !slices.Equal(got, eps) {
		t.Fatalf("Shared with %s set = %q, want %q", etcdtest.EndpointsEnv, got, eps)
	}
}

// TestHiddenOrMissingSkips: under LEASEKIT_NO_REDIS=1 Start and Shared
// skip, even with endpoints set, and without an etcd on PATH Start skips
// (when LEASEKIT_REQUIRE_REDIS is not 1), starting nothing.
func TestHiddenOrMissingSkips(t *testing.T) {
	skips := func(t *testing.T, name string, f func(t *testing.T)) {
		t.Helper()
		var skipped, reached bool
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { skipped = t.Skipped() })
			f(t)
			reached = true
		})
		if !skipped || reached {
			t.Errorf("%s: skipped %v, went on %v; want a skip", name, skipped, reached)
		}
	}
	t.Run("hidden", func(t *testing.T) {
		t.Setenv(etcdtest.NoServerEnv, "1")
		t.Setenv(etcdtest.EndpointsEnv, "127.0.0.1:1")
		if etcdtest.Available() {
			t.Error("Available() under NoServerEnv=1")
		}
		skips(t, "Start", func(t *testing.T) { etcdtest.Start(t, 3) })
		skips(t, "Shared", func(t *testing.T) { etcdtest.Shared(t) })
	})
	t.Run("missing", func(t *testing.T) {
		t.Setenv(etcdtest.NoServerEnv, "")
		t.Setenv(etcdtest.RequireEnv, "")
		t.Setenv("PATH", t.TempDir())
		if etcdtest.Available() {
			t.Error("Available() with an empty PATH")
		}
		skips(t, "Start", func(t *testing.T) { etcdtest.Start(t, 3) })
	})
}

// memberStatus is what the tests read of /v3/maintenance/status.
type memberStatus struct {
	MemberID uint64
	Leader   uint64
}

func status(t *testing.T, ep string) memberStatus {
	t.Helper()
	var st struct {
		Header struct {
			MemberID uint64 `json:"member_id,string"`
		} `json:"header"`
		Leader uint64 `json:"leader,string"`
	}
	if err := call(ep, "/v3/maintenance/status", struct{}{}, &st); err != nil {
		t.Fatal(err)
	}
	return memberStatus{MemberID: st.Header.MemberID, Leader: st.Leader}
}

func put(t *testing.T, ep, key, value string) {
	t.Helper()
	in := map[string]string{"key": b64(key), "value": b64(value)}
	var out struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	if err := call(ep, "/v3/kv/put", in, &out); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	if out.Header.Revision == 0 {
		t.Fatalf("put %q on %s: no revision in the answer", key, ep)
	}
}

// get reads key with a linearizable range (the default), and returns its
// value, or "" when it is absent.
func get(t *testing.T, ep, key string) string {
	t.Helper()
	var out struct {
		KVs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
	}
	if err := call(ep, "/v3/kv/range", map[string]string{"key": b64(key)}, &out); err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if len(out.KVs) == 0 {
		return ""
	}
	v, err := base64.StdEncoding.DecodeString(out.KVs[0].Value)
	if err != nil {
		t.Fatalf("get %q on %s: %v", key, ep, err)
	}
	return string(v)
}

func health(ep string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ep+"/health", nil)
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
	}
	if err := send(req, &h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("%s: /health is %q", ep, h.Health)
	}
	return nil
}

func call(ep, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ep+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	return send(req, out)
}

// httpClient keeps no idle connection, so leaves no goroutine for leakcheck.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func send(req *http.Request, out any) error {
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(req.URL.String() + ": " + resp.Status + ": " + string(bytes.TrimSpace(b)))
	}
	return json.Unmarshal(b, out)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
