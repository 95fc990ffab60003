package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas, each a redis-server
// on a loopback port.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts a cluster of n masters (the slots split between them
// by redis-cli --cluster create) and stops it when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	RequireBinary(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redistest: redis-cli not found: %v", err)
	}
	c := &Cluster{}
	addrs := make([]string, 0, n)
	for range n {
		bus, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000")
		c.Servers = append(c.Servers, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.awaitOK(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// awaitOK waits until every node reports cluster_state:ok.
func (c *Cluster) awaitOK() error {
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.Servers {
		node := redis.NewClient(&redis.Options{Addr: s.Addr})
		for {
			info, err := node.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = node.Close()
				return fmt.Errorf("cluster node %s not ok after 30s: %v %s", s.Addr, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = node.Close()
	}
	return nil
}

// Client returns a cluster client, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	addrs := make([]string, 0, len(c.Servers))
	for _, s := range c.Servers {
		addrs = append(addrs, s.Addr)
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = client.Close() })
	return client
}
