package lease_test

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// fixedOwner draws the same owner id every time, as a resent acquire (a
// go-redis retry after a lost reply) carries the first send's owner id.
type fixedOwner byte

func (f fixedOwner) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(f)
	}
	return len(p), nil
}

// TestAcquireIsIdempotentForItsOwner: the efficiency acquire, SET NX PX, sent
// again by its owner (a client retry after a lost reply) finds the key set
// and must still report the grant, while another owner is refused; the key
// keeps the first grant's value and ttl.
func TestAcquireIsIdempotentForItsOwner(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		core := func(owner byte) *lease.Core {
			c := lease.New(lease.Config{Kind: "efficiency", Client: b.Client, Prefix: "p:", Owners: fixedOwner(owner),
				Errors: lease.Errors{NotObtained: errNotObtained}})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		a := core('a')
		for i := range 2 { // the second call is a client retry after a lost reply
			if _, err := a.Try(ctx, "lock", time.Minute); err != nil {
				t.Fatalf("call %d by the owner: got %v, want granted", i+1, err)
			}
		}
		if _, err := core('b').Try(ctx, "lock", time.Minute); err == nil {
			t.Fatal("another owner: got granted, want not")
		}
		want := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{'a'}, 16)) // an owner id: 16 bytes in base64url
		if v := b.Client.Get(ctx, "p:{lock}").Val(); v != want {
			t.Fatalf("value: got %q, want the first owner's %q", v, want)
		}
		if ttl := b.Client.PTTL(ctx, "p:{lock}").Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("ttl: got %v, want within (0, 1m]", ttl)
		}
	})
}

var errNotObtained = errorString("not obtained")

type errorString string

func (e errorString) Error() string { return string(e) }
