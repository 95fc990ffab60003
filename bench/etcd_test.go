package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/etcdtest"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestEtcdRows runs the etcd subjects in quick mode, as `bash .ci/bench.sh
// -quick -scenarios ping,uncontended,convoy-8` would, on a real etcd
// cluster (LEASEKIT_ETCD_ENDPOINTS's, or three members started for the
// test: etcdtest.Shared skips, or fails under LEASEKIT_REQUIRE_REDIS=1,
// without etcd, as redistest.Real does without redis-server) and a real
// redis-server. The ping scenario has its etcd Put reference; uncontended
// and the convoy have a row of each etcd subject, none failed or
// overlapping; every grant of each fenced subject had a token above the one
// before it of its lock; correctness-etcd drew each from etcd (an etcd
// round trip per grant) and etcd-mutex sent Redis nothing; and the run left
// no key behind, in etcd or in Redis. It checks no timings.
func TestEtcdRows(t *testing.T) {
	endpoints := etcdtest.Shared(t)
	b := redistest.Real(t)
	libs := []string{"correctness", "correctness-etcd", "etcd-mutex"}
	res := runBench(t, "-quick", "-json", "-addr", b.Server.Addr, "-etcd", strings.Join(endpoints, ","),
		"-scenarios", "ping,uncontended,convoy-8", "-contenders", "8", "-libs", strings.Join(libs, ","))
	rows, stderr := res.printed(t), res.stderr

	want := map[string][]string{
		"ping":        {"PING", "PING after idle", "PUBLISH after idle", etcdPutName},
		"uncontended": append([]string{"2×PING", etcdPutName}, libs...),
		"convoy-8":    libs,
	}
	got := make(map[string][]string)
	for _, r := range rows {
		got[r.Scenario] = append(got[r.Scenario], r.Lib)
		checkEtcdRow(t, r, stderr)
	}
	for scenario, subjects := range want {
		if !slices.Equal(got[scenario], subjects) {
			t.Errorf("%s: got rows %q, want %q", scenario, got[scenario], subjects)
		}
	}
	for _, want := range []string{"etcd: etcd ", "members, endpoints " + strings.Join(endpoints, ","), "WithTokens(etcdtokens.New(etcd))", "concurrency.Mutex"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the header lacks %q; stderr:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "no etcd rows") {
		t.Errorf("the run says it has no etcd rows; stderr:\n%s", stderr)
	}

	m := regexp.MustCompile(`deleted the \d+ etcd keys this run made \(bench:(\w+):\*`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the run did not say what it deleted in etcd; stderr:\n%s", stderr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, prefix := range etcdPrefixes(m[1]) {
		resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != 0 {
			t.Errorf("the run left %d etcd keys under %q", resp.Count, prefix)
		}
	}
	if keys := b.Client.Keys(t.Context(), "*").Val(); len(keys) != 0 {
		t.Errorf("the run left %d Redis keys, among them %q", len(keys), keys[:min(len(keys), 5)])
	}
}

// checkEtcdRow checks a row of TestEtcdRows's run.
func checkEtcdRow(t *testing.T, r row, stderr string) {
	t.Helper()
	convoy := isConvoyN(r.Scenario)
	if r.N == 0 || r.Failures != 0 || r.Overlaps != 0 || (convoy && r.N != 8) {
		t.Errorf("%s/%s: got n %d, %d failures, %d overlaps; want ops (8 grants in a convoy), none failed or overlapping; stderr:\n%s",
			r.Scenario, r.Lib, r.N, r.Failures, r.Overlaps, stderr)
	}
	switch {
	case r.Lib == etcdPutName:
		if !r.Reference || r.P50 <= 0 || r.EtcdTripsPerOp < 1 {
			t.Errorf("%s/%s: got reference %v, p50 %dns, %.2f etcd trips/op; want a reference that took time, one etcd round trip an op",
				r.Scenario, r.Lib, r.Reference, r.P50, r.EtcdTripsPerOp)
		}
		return
	case r.Scenario == "ping":
		return
	case r.Scenario == "uncontended" && r.P50EtcdPuts <= 0, convoy && r.HandoffEtcdPuts <= 0:
		t.Errorf("%s/%s: got p50 %.2f etcd Puts, handoff %.2f; want one in etcd Puts", r.Scenario, r.Lib, r.P50EtcdPuts, r.HandoffEtcdPuts)
	}
	if r.Reference {
		return
	}
	// Every grant's token is checked: in a convoy the timed grants', in
	// uncontended those of the warm-up and the cost pass too.
	if r.Tokens < r.N || (convoy && r.Tokens != r.N) || r.TokenRegressions != 0 {
		t.Errorf("%s/%s: got %d grants' tokens checked, %d not above the one before; want all %d checked, every one above; stderr:\n%s",
			r.Scenario, r.Lib, r.Tokens, r.TokenRegressions, r.N, stderr)
	}
	switch r.Lib {
	case "correctness":
		if r.EtcdTripsPerOp != 0 {
			t.Errorf("%s/correctness: got %.2f etcd trips/op, want none", r.Scenario, r.EtcdTripsPerOp)
		}
	case "correctness-etcd":
		if convoy && r.EtcdTripP50 <= 0 {
			t.Errorf("%s/correctness-etcd: got etcd trip p50 %dns, want the time of its handoffs' etcd round trips", r.Scenario, r.EtcdTripP50)
		}
		if r.EtcdTripsPerOp < 1 || r.TripsPerOp <= 0 {
			t.Errorf("%s/correctness-etcd: got %.2f etcd and %.2f Redis trips/op, want its token from etcd and its grant from Redis",
				r.Scenario, r.EtcdTripsPerOp, r.TripsPerOp)
		}
	case "etcd-mutex":
		if r.TripsPerOp != 0 || r.EtcdTripsPerOp < 1 || (!convoy && r.EtcdTripsPerOp < 2) {
			t.Errorf("%s/etcd-mutex: got %.2f Redis and %.2f etcd trips/op; want no Redis, and a Lock and an Unlock in etcd",
				r.Scenario, r.TripsPerOp, r.EtcdTripsPerOp)
		}
	}
}
