package redistest_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// keys hash in every way Redis Cluster knows: a tag, an empty tag, a tag
// after an empty one, nested and unclosed braces.
var keys = []string{
	"leasekit:{job}", "job", "leasekit:job", "{}", "foo{}{bar}", "foo{{bar}}zap",
	"foo{bar}{zap}", "{user1000}.following", "{", "}{", "a{b", "", "123456789",
}

func TestSlotHashTags(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"123456789", 0x31c3 % redistest.Slots}, // the CRC16 check value of Redis's cluster spec
		{"leasekit:{job}", redistest.Slot("job")},
		{"foo{bar}{zap}", redistest.Slot("bar")},
		{"foo{{bar}}zap", redistest.Slot("{bar")},
		{"foo{}{bar}", redistest.Slot("foo{}{bar}")},
	} {
		if got := redistest.Slot(tc.key); got != tc.want {
			t.Errorf("Slot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

func TestSlotMatchesClusterKeyslot(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	if got := len(c.Masters()); got != 3 {
		t.Fatalf("StartCluster(3): %d masters, want 3", got)
	}
	client := c.Servers[0].Client(t)
	for _, k := range keys {
		want, err := client.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := redistest.Slot(k); got != int(want) {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

func TestClusterWithReplicasPairing(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterWithReplicas(t, 3, 1)
	masters := c.Masters()
	if len(c.Servers) != 6 || len(masters) != 3 {
		t.Fatalf("%d servers, %d masters; want 6 and 3", len(c.Servers), len(masters))
	}
	seen := map[*redistest.Server]bool{}
	for _, m := range masters {
		assertRole(t, m, "master")
		rs := c.ReplicasOf(m)
		if len(rs) != 1 {
			t.Fatalf("master %s has %d replicas, want 1", m.Addr, len(rs))
		}
		assertRole(t, rs[0], "slave")
		seen[m], seen[rs[0]] = true, true
		role, err := rs[0].Client(t).Do(t.Context(), "ROLE").Slice()
		if err != nil {
			t.Fatalf("ROLE on %s: %v", rs[0].Addr, err)
		}
		if got := fmt.Sprintf("%v:%v", role[1], role[2]); got != m.Addr {
			t.Errorf("replica %s follows %s, harness says %s", rs[0].Addr, got, m.Addr)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("masters and replicas cover %d servers of 6", len(seen))
	}
}

func TestMigrateSlot(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterWithReplicas(t, 3, 1)
	client := c.Client(t)
	key, slot := "leasekit:{job}", redistest.Slot("leasekit:{job}")
	set(t, client, key, "before")
	set(t, client, "{job}:updated", "v1")
	if err := client.Set(t.Context(), "{job}:expiring", "x", time.Millisecond).Err(); err != nil {
		t.Fatal(err) // by MoveKeys, gone or still listed but expired (MIGRATE's NOKEY)
	}
	from := c.MasterOf(t, slot)
	to := c.Masters()[0]
	if to == from {
		to = c.Masters()[1]
	}

	m := c.BeginMigration(t, slot, to)
	if m.From != from || m.To != to {
		t.Fatalf("migration from %s to %s, want %s to %s", m.From.Addr, m.To.Addr, from.Addr, to.Addr)
	}
	set(t, client, "{job}:updated", "v2") // the source still serves the keys it holds
	m.MoveKeys(t)
	set(t, client, "{job}:new", "asked") // a new key goes to the target, by ASK
	m.Finish(t)

	if got := c.MasterOf(t, slot); got != to {
		t.Fatalf("slot %d on %s after the migration, want %s", slot, got.Addr, to.Addr)
	}
	fresh := c.Client(t)
	node, err := fresh.MasterForKey(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if node.Options().Addr != to.Addr {
		t.Fatalf("a fresh client finds %s on %s, want %s", key, node.Options().Addr, to.Addr)
	}
	for k, want := range map[string]string{key: "before", "{job}:updated": "v2", "{job}:new": "asked"} {
		if got := get(t, fresh, k); got != want {
			t.Errorf("GET %s = %q, want %q", k, got, want)
		}
	}
	if n := from.Client(t).DBSize(t.Context()).Val(); n != 0 {
		t.Errorf("the source still holds %d keys", n)
	}
	if n := fresh.Exists(t.Context(), "{job}:expiring").Val(); n != 0 {
		t.Errorf("the expired key came back")
	}

	c.MigrateSlot(t, slot, from) // and back, in one call
	if got := get(t, c.Client(t), key); got != "before" {
		t.Errorf("GET %s after the way back = %q", key, got)
	}
}

func TestFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterWithReplicas(t, 3, 1)
	client := c.Client(t)
	key, slot := "leasekit:{job}", redistest.Slot("leasekit:{job}")
	set(t, client, key, "before")
	old := c.MasterOf(t, slot)
	replica := c.ReplicasOf(old)[0]

	promoted := c.Failover(t, old)
	if promoted != replica {
		t.Fatalf("Failover promoted %s, want the replica %s", promoted.Addr, replica.Addr)
	}
	assertRole(t, promoted, "master")
	assertRole(t, old, "slave")
	if got := c.MasterOf(t, slot); got != promoted {
		t.Fatalf("slot %d on %s after the failover, want %s", slot, got.Addr, promoted.Addr)
	}
	if !slices.Contains(c.Masters(), promoted) || slices.Contains(c.Masters(), old) {
		t.Fatalf("Masters() after the failover: %v", addrs(c.Masters()))
	}
	if rs := c.ReplicasOf(promoted); len(rs) != 1 || rs[0] != old {
		t.Fatalf("ReplicasOf(new master) = %v, want the old master", addrs(rs))
	}
	fresh := c.Client(t)
	if got := get(t, fresh, key); got != "before" {
		t.Fatalf("GET %s after a coordinated failover = %q, want before", key, got)
	}
	set(t, fresh, key, "after")
	if got := get(t, fresh, key); got != "after" {
		t.Fatalf("GET %s = %q, want after", key, got)
	}
	if got := get(t, client, key); got != "after" { // the old client follows MOVED
		t.Fatalf("GET %s on the first client = %q, want after", key, got)
	}

	back := c.Takeover(t, promoted)
	if back != old || c.MasterOf(t, slot) != old {
		t.Fatalf("Takeover promoted %s, want %s", back.Addr, old.Addr)
	}
}

func set(t *testing.T, c *redis.ClusterClient, key, value string) {
	t.Helper()
	if err := c.Set(t.Context(), key, value, 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

func get(t *testing.T, c *redis.ClusterClient, key string) string {
	t.Helper()
	v, err := c.Get(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func assertRole(t *testing.T, s *redistest.Server, want string) {
	t.Helper()
	role, err := s.Client(t).Do(t.Context(), "ROLE").Slice()
	if err != nil {
		t.Fatalf("ROLE on %s: %v", s.Addr, err)
	}
	if role[0] != want {
		t.Fatalf("ROLE on %s = %v, want %s", s.Addr, role[0], want)
	}
}

func addrs(ss []*redistest.Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Addr)
	}
	return out
}
