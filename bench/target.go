package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/redis/go-redis/v9"
)

// target is the Redis a run measures: one server, a cluster, or an
// in-process miniredis, and with -etcd the etcd cluster. Workers of
// convoy-procs reach the same Redis (and no etcd).
type target struct {
	client   redis.UniversalClient
	addrs    []string // the server, or the cluster's seed nodes
	cluster  bool
	user     string
	password string
	db       int
	tls      *tls.Config
	mini     *miniredis.Miniredis
	// proxy, with -rtt, is what the clients reach instead of the server
	// (addrs is its address).
	proxy *faultproxy.Proxy
	// noTracking says the server has no CLIENT TRACKING (miniredis), which
	// rueidis's client-side caching needs.
	noTracking bool
	// sent counts the commands the bench's clients send, by name.
	sent *sentCounter
	// etcd is the -etcd cluster; nil without -etcd.
	etcd *etcdCluster
}

// where names what the target is, for messages: host:port (or the seed
// nodes), never a password.
func (t *target) where() string {
	if t.mini != nil {
		return "in-process miniredis at " + t.addrs[0]
	}
	return strings.Join(t.addrs, ",")
}

// dial opens the target that cfg names: -cluster's nodes, -url, -addr, or a
// new in-process miniredis.
func dial(cfg config) (*target, error) {
	t := &target{sent: newSentCounter()}
	switch {
	case len(cfg.cluster) > 0:
		t.addrs, t.cluster = cfg.cluster, true
	case cfg.url != "":
		opts, err := redis.ParseURL(cfg.url)
		if err != nil {
			return nil, fmt.Errorf("-url: %w", err)
		}
		t.addrs, t.user, t.password, t.db, t.tls = []string{opts.Addr}, opts.Username, opts.Password, opts.DB, opts.TLSConfig
	case cfg.addr != "":
		t.addrs = []string{cfg.addr}
	default:
		m, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("starting miniredis: %w", err)
		}
		t.mini, t.addrs, t.noTracking = m, []string{m.Addr()}, true
	}
	if cfg.rtt > 0 {
		p, err := faultproxy.New(t.addrs[0])
		if err != nil {
			t.close()
			return nil, fmt.Errorf("-rtt: %w", err)
		}
		p.Delay(cfg.rtt)
		t.proxy, t.addrs = p, []string{p.Addr()}
	}
	t.client = t.newClient()
	if len(cfg.etcd) > 0 {
		e, err := dialEtcd(cfg.etcd)
		if err != nil {
			t.close()
			return nil, err
		}
		t.etcd = e
	}
	return t, nil
}

// newClient is a go-redis client of the target whose commands t.sent counts.
func (t *target) newClient() redis.UniversalClient {
	var c redis.UniversalClient
	if t.cluster {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: t.addrs, Username: t.user, Password: t.password, TLSConfig: t.tls})
	} else {
		c = redis.NewClient(&redis.Options{Addr: t.addrs[0], Username: t.user, Password: t.password, DB: t.db, TLSConfig: t.tls})
	}
	c.AddHook(t.sent)
	return c
}

func (t *target) close() {
	if t.etcd != nil {
		t.etcd.close()
	}
	if t.client != nil {
		_ = t.client.Close()
	}
	if t.proxy != nil {
		_ = t.proxy.Close()
	}
	if t.mini != nil {
		t.mini.Close()
	}
}

// describe says what the target is, for the header.
func (t *target) describe(ctx context.Context) string {
	switch {
	case t.mini != nil:
		return fmt.Sprintf("in-process miniredis %s (no flags given): this measures client overhead, not a network round trip, and has no server costs; give -addr, or run .ci/bench.sh, for a real server",
			moduleVersion("github.com/alicebob/miniredis/v2"))
	case t.cluster:
		var n atomic.Int32 // ForEachMaster runs fn on the masters concurrently
		_ = t.client.(*redis.ClusterClient).ForEachMaster(ctx, func(context.Context, *redis.Client) error { n.Add(1); return nil })
		return fmt.Sprintf("Redis Cluster of %d masters, redis-server %s, seed nodes %s", n.Load(), serverVersion(ctx, t.client), t.where())
	}
	return "redis-server " + serverVersion(ctx, t.client) + " at " + t.where()
}

func serverVersion(ctx context.Context, client redis.UniversalClient) string {
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return "(version unknown)"
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "(version unknown)"
}

// poolSize is the go-redis pool size per node.
func (t *target) poolSize() int {
	if c, ok := t.client.(*redis.ClusterClient); ok {
		return c.Options().PoolSize
	}
	return t.client.(*redis.Client).Options().PoolSize
}

// nodes runs fn on every node that holds keys: the server, or each master.
func (t *target) nodes(ctx context.Context, fn func(ctx context.Context, node *redis.Client) error) error {
	if c, ok := t.client.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, fn)
	}
	return fn(ctx, t.client.(*redis.Client))
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// commandStats reads INFO commandstats, summed over the nodes; nil when the
// server has none (miniredis).
func (t *target) commandStats(ctx context.Context) (map[string]cmdStat, error) {
	if t.mini != nil {
		return nil, nil
	}
	var mu sync.Mutex
	total := make(map[string]cmdStat)
	err := t.nodes(ctx, func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		stats, err := parseCommandStats(info)
		mu.Lock()
		defer mu.Unlock()
		for name, s := range stats {
			sum := total[name]
			total[name] = cmdStat{sum.calls + s.calls, sum.usec + s.usec}
		}
		return err
	})
	return total, err
}

// parseCommandStats reads lines such as
// "cmdstat_evalsha:calls=3,usec=45,usec_per_call=15.00,...".
func parseCommandStats(info string) (map[string]cmdStat, error) {
	stats := make(map[string]cmdStat)
	for line := range strings.SplitSeq(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		var s cmdStat
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			switch {
			case k != "calls" && k != "usec":
			case err != nil:
				return nil, fmt.Errorf("INFO commandstats: %s: %q: %w", name, f, err)
			case k == "calls":
				s.calls = n
			default:
				s.usec = n
			}
		}
		stats[name] = s
	}
	return stats, nil
}

// cleanup deletes every key whose name holds the run's id, on every node,
// and returns how many.
func (t *target) cleanup(ctx context.Context, id string) (int, error) {
	var mu sync.Mutex
	deleted := 0
	err := t.nodes(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "*bench:"+id+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		var errs []error
		for _, k := range keys { // one at a time: in a cluster they span slots
			n, err := node.Del(ctx, k).Result()
			errs = append(errs, err)
			mu.Lock()
			deleted += int(n)
			mu.Unlock()
		}
		return errors.Join(errs...)
	})
	return deleted, err
}
