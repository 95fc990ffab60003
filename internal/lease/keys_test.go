package lease

import (
	"fmt"
	"testing"
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
