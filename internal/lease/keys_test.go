package lease

import (
	"fmt"
	"testing"
	"time"
)

func TestKeysAreKeptForABoundedNumberOfNames(t *testing.T) {
	c := New(Config{Prefix: "p:"})
	first := c.lockKeys("job")
	if again := c.lockKeys("job"); again != first {
		t.Fatal("the keys of a name seen before were built again")
	}
	want := []string{"p:{job}", "p:{job}:queue", "p:{job}:fence"}
	if got := first.keys; fmt.Sprint(got) != fmt.Sprint(want) || first.key != want[0] {
		t.Fatalf("keys: got %v (key %q), want %v", got, first.key, want)
	}
	for i := range 2 * keyCacheSize {
		name := fmt.Sprintf("n%d", i)
		if k := c.lockKeys(name); k.key != "p:{"+name+"}" {
			t.Fatalf("lock key of %s: got %q", name, k.key)
		}
	}
	if n := c.cached.Load(); n != keyCacheSize {
		t.Fatalf("names kept: got %d, want at most %d", n, keyCacheSize)
	}
	c = New(Config{Prefix: "p:"})
	long := string(make([]byte, keyCacheNameLen+1))
	if first, again := c.lockKeys(long), c.lockKeys(long); first == again || c.cached.Load() != 0 {
		t.Fatalf("a name of %d bytes was kept; want names over %d built afresh", len(long), keyCacheNameLen)
	}
}

func TestHeaderLimit(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   int
		ok     bool
	}{
		{"#4", 4, true},
		{"#4*", 4, true},
		{"4", 0, false},
		{"#0", 0, false},
		{"#x", 0, false},
		{"#4 x", 0, false},
		{"", 0, false},
	} {
		if got, ok := HeaderLimit(tc.header); ok != tc.ok || ok && got != tc.want {
			t.Errorf("%q: got %d, %v, want %d, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTickets(t *testing.T) {
	c := New(Config{Prefix: "p:"})
	a := &acquire{c: c, keys: c.lockKeys("job"), owner: "OWNER", ttl: time.Second}
	e := a.newEntry("ID", "p:grants:X")
	if id, channel, ok := EntryTicket(e.text(3)); !ok || id != "ID" || channel != "p:grants:X" {
		t.Fatalf("EntryTicket: got %q, %q, %v", id, channel, ok)
	}
	if _, _, ok := EntryTicket("OWNER 1000 e 0 ID.0"); ok {
		t.Fatal("EntryTicket of an entry without a channel: got ok")
	}
	if id, ok := GrantTicket("ID.3 - 12 345"); !ok || id != "ID" {
		t.Fatalf("GrantTicket: got %q, %v", id, ok)
	}
	if _, ok := GrantTicket("ID.3"); ok {
		t.Fatal("GrantTicket of a bare ticket: got ok")
	}
}
