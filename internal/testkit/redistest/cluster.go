package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/redis/go-redis/v9"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// clusterWait bounds every wait of the cluster helpers.
const clusterWait = 30 * time.Second

// Cluster is a Redis Cluster of redis-servers on loopback ports: masters,
// each with zero or more replicas. Its methods are for the test's goroutine.
type Cluster struct {
	// Servers are all the nodes, masters and replicas, in start order.
	Servers []*Server

	admin map[*Server]*redis.Client // one plain client per node, for the harness
	ids   map[*Server]string        // CLUSTER MYID of each node

	mu       sync.Mutex
	masterOf map[*Server]*Server // each replica's master, as last agreed; masters absent
}

// StartCluster starts a cluster of n masters without replicas (the slots
// split between them by redis-cli --cluster create) and stops it when the
// test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return startCluster(t, n, 0, 5000)
}

// StartClusterWith is StartCluster with extra redis-server arguments for
// every node (a renamed command, say).
func StartClusterWith(t testing.TB, n int, args ...string) *Cluster {
	t.Helper()
	return startCluster(t, n, 0, 5000, args...)
}

// StartClusterWithReplicas starts a cluster of masters, each with
// replicasPerMaster replicas (redis-cli --cluster create --cluster-replicas
// decides the pairing; see Masters and ReplicasOf), and returns once every
// node reports cluster_state:ok, every node agrees on the topology and every
// replica's link to its master is up. It stops the cluster when the test ends.
func StartClusterWithReplicas(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	return startCluster(t, masters, replicasPerMaster, 2000)
}

// startCluster starts masters*(1+replicas) nodes with the given
// cluster-node-timeout (ms) and extra arguments, joins them with redis-cli
// and waits for them.
func startCluster(t testing.TB, masters, replicas, nodeTimeout int, extra ...string) *Cluster {
	t.Helper()
	RequireBinary(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redistest: redis-cli not found: %v", err)
	}
	c := &Cluster{admin: map[*Server]*redis.Client{}, ids: map[*Server]string{}}
	addrs := make([]string, 0, masters*(1+replicas))
	if replicas > 0 { // a replica's first full sync starts at once, not after 5s
		extra = append(extra, "--repl-diskless-sync-delay", "0")
	}
	for range masters * (1 + replicas) {
		c.addNode(t, nodeTimeout, extra...)
		addrs = append(addrs, c.Servers[len(c.Servers)-1].Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.await(t, "cluster create", nil)
	return c
}

// addNode starts one cluster-enabled redis-server, with extra config
// arguments, an admin client (closed before the server stops) and its node ID.
func (c *Cluster) addNode(t testing.TB, nodeTimeout int, extra ...string) {
	t.Helper()
	bus, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := Start(t, append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", strconv.Itoa(nodeTimeout)}, extra...)...)
	admin := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	id, err := admin.Do(t.Context(), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr, err)
	}
	c.Servers = append(c.Servers, s)
	c.admin[s], c.ids[s] = admin, id
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

// ID returns the node ID (CLUSTER MYID) of s.
func (c *Cluster) ID(s *Server) string { return c.ids[s] }

// Masters returns the masters, in start order, as of the last topology the
// harness waited for (start, Failover).
func (c *Cluster) Masters() []*Server { return c.ReplicasOf(nil) }

// ReplicasOf returns the replicas of master, in start order, as of the last
// topology the harness waited for (start, Failover); of nil, the masters.
func (c *Cluster) ReplicasOf(master *Server) []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rs []*Server
	for _, s := range c.Servers {
		if c.masterOf[s] == master {
			rs = append(rs, s)
		}
	}
	return rs
}

// Slot returns the Redis Cluster hash slot of key, as leasekit computes it
// (notify.Slot) to pick a sharded channel's connection.
func Slot(key string) int { return notify.Slot(key) }

// MasterOf returns the master that serves slot, as CLUSTER NODES on the first
// node that answers reports it.
func (c *Cluster) MasterOf(t testing.TB, slot int) *Server {
	t.Helper()
	var errs []error
	for _, s := range c.Servers {
		v, err := c.viewOf(t.Context(), s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		id := v.owner(slot)
		for _, m := range c.Servers {
			if c.ids[m] == id {
				return m
			}
		}
		t.Fatalf("redistest: slot %d: %s reports no known master serving it (owner %q)", slot, s.Addr, id)
	}
	t.Fatalf("redistest: slot %d: no node answered CLUSTER NODES: %v", slot, errors.Join(errs...))
	return nil
}

// Migration is one slot being moved from master From to master To, as
// BeginMigration left it: IMPORTING on To, MIGRATING on From.
type Migration struct {
	// Slot is the slot being moved.
	Slot int
	// From is the master that served Slot at BeginMigration, To the master
	// that serves it after Finish.
	From, To *Server

	c *Cluster
}

// MigrateSlot moves slot, with its keys, from its master to master to, and
// returns once every node agrees that to serves it. It is BeginMigration,
// MoveKeys and Finish in a row.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, to *Server) {
	t.Helper()
	m := c.BeginMigration(t, slot, to)
	m.MoveKeys(t)
	m.Finish(t)
}

// BeginMigration opens the migration of slot from its master to master to:
// CLUSTER SETSLOT IMPORTING on to, then MIGRATING on the source. Until Finish,
// the source serves the slot's keys it still holds and redirects the others
// to to with ASK.
func (c *Cluster) BeginMigration(t testing.TB, slot int, to *Server) *Migration {
	t.Helper()
	if slot < 0 || slot >= Slots {
		t.Fatalf("redistest: BeginMigration: slot %d out of range", slot)
	}
	if !slices.Contains(c.Masters(), to) {
		t.Fatalf("redistest: BeginMigration of slot %d: %s is not a master", slot, to.Addr)
	}
	from := c.MasterOf(t, slot)
	if from == to {
		t.Fatalf("redistest: BeginMigration: slot %d is already on %s", slot, to.Addr)
	}
	m := &Migration{Slot: slot, From: from, To: to, c: c}
	m.setSlot(t, to, "IMPORTING", c.ids[from])
	m.setSlot(t, from, "MIGRATING", c.ids[to])
	return m
}

// MoveKeys moves the slot's keys still on the source to the target (CLUSTER
// GETKEYSINSLOT, then MIGRATE ... KEYS), until the source holds none. Keys
// that expire or are deleted meanwhile (MIGRATE's NOKEY) are skipped.
func (m *Migration) MoveKeys(t testing.TB) {
	t.Helper()
	host, port, _ := net.SplitHostPort(m.To.Addr)
	src := m.c.admin[m.From]
	for deadline := time.Now().Add(clusterWait); ; {
		keys, err := src.ClusterGetKeysInSlot(t.Context(), m.Slot, 100).Result()
		if err != nil {
			t.Fatalf("redistest: slot %d: CLUSTER GETKEYSINSLOT on %s: %v", m.Slot, m.From.Addr, err)
		}
		if len(keys) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: slot %d: %s still holds keys after %v (%q...)", m.Slot, m.From.Addr, clusterWait, keys[0])
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("redistest: slot %d: MIGRATE of %d keys from %s to %s: %v", m.Slot, len(keys), m.From.Addr, m.To.Addr, err)
		}
	}
}

// Keys returns the slot's keys the source still holds.
func (m *Migration) Keys(t testing.TB) []string {
	t.Helper()
	keys, err := m.c.admin[m.From].ClusterGetKeysInSlot(t.Context(), m.Slot, 1000).Result()
	if err != nil {
		t.Fatalf("redistest: slot %d: CLUSTER GETKEYSINSLOT on %s: %v", m.Slot, m.From.Addr, err)
	}
	return keys
}

// MoveOnly moves the given keys of the slot to the target (MIGRATE ... KEYS),
// leaving the others on the source: a half-migrated slot, on which Redis
// refuses a command on keys of both sides with TRYAGAIN.
func (m *Migration) MoveOnly(t testing.TB, keys ...string) {
	t.Helper()
	if len(keys) == 0 {
		return
	}
	host, port, _ := net.SplitHostPort(m.To.Addr)
	args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.c.admin[m.From].Do(t.Context(), args...).Err(); err != nil {
		t.Fatalf("redistest: slot %d: MIGRATE of %d keys from %s to %s: %v", m.Slot, len(keys), m.From.Addr, m.To.Addr, err)
	}
}

// Finish moves any keys left (written to the source since MoveKeys), assigns
// the slot to the target with CLUSTER SETSLOT NODE (target, source, then the
// other masters), and waits until every node agrees that the target serves it.
func (m *Migration) Finish(t testing.TB) {
	t.Helper()
	m.finish(t, m.To, m.From, 0)
}

// FinishSourceFirst is Finish in the order the Redis docs advise against:
// the source is told first, and the target, still importing, only pause
// later. Meanwhile each redirects the slot to the other (MOVED), as when an
// operator's script or a crash between the two steps gets the order wrong.
func (m *Migration) FinishSourceFirst(t testing.TB, pause time.Duration) {
	t.Helper()
	m.finish(t, m.From, m.To, pause)
}

// finish moves the keys left and assigns the slot to the target on first,
// then, after pause, on second and the other masters, and waits until every
// node agrees.
func (m *Migration) finish(t testing.TB, first, second *Server, pause time.Duration) {
	t.Helper()
	m.MoveKeys(t)
	dst := m.c.ids[m.To]
	m.setSlot(t, first, "NODE", dst)
	time.Sleep(pause)
	m.setSlot(t, second, "NODE", dst)
	for _, s := range m.c.Masters() {
		if s != m.To && s != m.From {
			m.setSlot(t, s, "NODE", dst)
		}
	}
	m.c.await(t, fmt.Sprintf("migration of slot %d to %s", m.Slot, m.To.Addr), func(v view) bool {
		return v.owner(m.Slot) == dst
	})
}

// setSlot sends CLUSTER SETSLOT <slot> <sub> <id> to s.
func (m *Migration) setSlot(t testing.TB, s *Server, sub, id string) {
	t.Helper()
	if err := m.c.admin[s].Do(t.Context(), "CLUSTER", "SETSLOT", m.Slot, sub, id).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER SETSLOT %d %s %s on %s: %v", m.Slot, sub, id, s.Addr, err)
	}
}

// Failover promotes the first replica of master with a coordinated CLUSTER
// FAILOVER sent to it (the replica catches up with master, which stops
// writes meanwhile, so no acknowledged write is lost), waits until the
// replica is master of master's slots, master its replica, and every node
// agrees with cluster_state:ok, and returns the new master.
func (c *Cluster) Failover(t testing.TB, master *Server) *Server {
	t.Helper()
	return c.failover(t, master, "")
}

// Takeover is Failover with CLUSTER FAILOVER TAKEOVER: the replica takes the
// slots at once, without master's agreement nor catching up with it, so
// writes master had not replicated yet are lost, as in a crash.
func (c *Cluster) Takeover(t testing.TB, master *Server) *Server {
	t.Helper()
	return c.failover(t, master, "TAKEOVER")
}

// failover sends CLUSTER FAILOVER [mode] to master's first replica and waits
// for the roles to swap.
func (c *Cluster) failover(t testing.TB, master *Server, mode string) *Server {
	t.Helper()
	replicas := c.ReplicasOf(master)
	if len(replicas) == 0 {
		t.Fatalf("redistest: failover of %s: it is not a master with a replica", master.Addr)
	}
	r := replicas[0]
	args := []any{"CLUSTER", "FAILOVER"}
	if mode != "" {
		args = append(args, mode)
	}
	if err := c.admin[r].Do(t.Context(), args...).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER FAILOVER %s on %s: %v", mode, r.Addr, err)
	}
	newID, oldID := c.ids[r], c.ids[master]
	c.await(t, fmt.Sprintf("failover of %s to %s", master.Addr, r.Addr), func(v view) bool {
		return v[newID].master == "" && v[oldID].master == newID
	})
	return r
}

// view is one node's picture of the cluster from CLUSTER NODES: every
// node's master (replicas) or slot ranges (masters), by node ID.
type view map[string]viewNode

type viewNode struct {
	master  string   // the master's ID for a replica, "" for a master
	slots   []string // "0-5460", "5461"; open migrations ([...]) left out
	trouble string   // the flags, when they say failing, handshake or no address
}

// owner returns the ID of the master that serves slot in v, or "".
func (v view) owner(slot int) string {
	for id, n := range v {
		for _, r := range n.slots {
			lo, hi, _ := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if hi != "" {
				b, _ = strconv.Atoi(hi)
			}
			if a <= slot && slot <= b {
				return id
			}
		}
	}
	return ""
}

// String renders v the same way for the same picture, so views compare.
func (v view) String() string {
	lines := make([]string, 0, len(v))
	for id, n := range v {
		lines = append(lines, id+" "+n.master+" "+strings.Join(n.slots, ","))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// viewOf reads s's CLUSTER NODES.
func (c *Cluster) viewOf(ctx context.Context, s *Server) (view, error) {
	out, err := c.admin[s].ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", s.Addr, err)
	}
	v := view{}
	for line := range strings.Lines(strings.TrimSpace(out)) {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("%s: CLUSTER NODES line %q", s.Addr, line)
		}
		n := viewNode{}
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "fail", "fail?", "handshake", "noaddr":
				n.trouble = f[2]
			}
		}
		if f[3] != "-" {
			n.master = f[3]
		}
		for _, r := range f[8:] {
			if !strings.HasPrefix(r, "[") {
				n.slots = append(n.slots, r)
			}
		}
		v[f[0]] = n
	}
	return v, nil
}

// await waits until every node reports cluster_state:ok and the same view
// of all the nodes, every replica's master link is up, and want (if not nil)
// holds of that view; then it records the roles. It fails the test after
// clusterWait, naming what, with the last thing that was not so.
func (c *Cluster) await(t testing.TB, what string, want func(view) bool) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(clusterWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var v view
		if v, last = c.settled(t.Context()); last != nil {
			continue
		}
		if want != nil && !want(v) {
			last = fmt.Errorf("the nodes agree on a topology that is not the one expected:\n%s", v)
			continue
		}
		c.record(v)
		return
	}
	t.Fatalf("redistest: %s: cluster not settled after %v: %v", what, clusterWait, last)
}

// settled returns the view every node agrees on, or what is not settled yet.
func (c *Cluster) settled(ctx context.Context) (view, error) {
	var agreed view
	for _, s := range c.Servers {
		info, err := c.admin[s].ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return nil, fmt.Errorf("node %s not ok: %v %s", s.Addr, err, firstLine(info))
		}
		v, err := c.viewOf(ctx, s)
		if err != nil {
			return nil, err
		}
		if len(v) != len(c.Servers) {
			return nil, fmt.Errorf("%s knows %d nodes of %d", s.Addr, len(v), len(c.Servers))
		}
		for id, n := range v {
			if n.trouble != "" {
				return nil, fmt.Errorf("%s sees node %s as %s", s.Addr, id, n.trouble)
			}
		}
		if agreed == nil {
			agreed = v
		} else if v.String() != agreed.String() {
			return nil, fmt.Errorf("%s and %s disagree:\n%s\nvs\n%s", c.Servers[0].Addr, s.Addr, agreed, v)
		}
	}
	for _, s := range c.Servers {
		if agreed[c.ids[s]].master == "" {
			continue
		}
		info, err := c.admin[s].Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return nil, fmt.Errorf("replica %s: master link not up: %v", s.Addr, err)
		}
	}
	return agreed, nil
}

// record sets the roles from v.
func (c *Cluster) record(v view) {
	byID := map[string]*Server{}
	for _, s := range c.Servers {
		byID[c.ids[s]] = s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.masterOf = map[*Server]*Server{}
	for _, s := range c.Servers {
		if m := v[c.ids[s]].master; m != "" {
			c.masterOf[s] = byID[m]
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
