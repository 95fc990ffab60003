package correctness_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/leasetest"
)

// FuzzAcquireAndWrite feeds arbitrary names, ttls, tokens and values to
// TryAcquire and Register.Write: each succeeds or returns a sentinel error,
// never a panic or another error, and a written value reads back exactly.
// The seeds run with every go test; go test -fuzz explores more.
func FuzzAcquireAndWrite(f *testing.F) {
	names := []string{"", "account", "{", "}", "}x", "a}b", "\n", "a:b", "\x00\xff", strings.Repeat("r", 1<<20)}
	tokens := []uint64{0, 1, 33, 1<<53 + 1, 1<<64 - 1}
	for i, name := range names {
		f.Add(name, int64(time.Second), tokens[i%len(tokens)], []byte("v"))
	}
	f.Add("k", int64(-1), uint64(7), []byte{})
	f.Add("k", int64(time.Millisecond)-1, uint64(7), []byte("\x00\r\n"))
	// The fence, both ways: a lower token after 9 is refused, an equal one
	// is accepted.
	f.Add("w", int64(time.Second), uint64(9), []byte("a"))
	f.Add("w", int64(time.Second), uint64(8), []byte("b"))
	f.Add("w", int64(time.Second), uint64(9), []byte("c"))
	env := leasetest.New(f)
	l := correctness.New(env.Client, correctness.WithAudit(false))
	f.Cleanup(func() { _ = l.Close() })
	reg := correctness.NewRegister(env.Client)
	f.Fuzz(func(t *testing.T, name string, ttl int64, token uint64, value []byte) {
		ctx := t.Context()
		lease, err := l.TryAcquire(ctx, name, time.Duration(ttl))
		switch {
		case err == nil:
			if lease.Token() == 0 {
				t.Fatalf("TryAcquire(%q): token 0", trim(name))
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		// ErrLateGrant: a lease of a millisecond or two can lapse before its
		// reply arrives (and ErrNotObtained, should a late grant's release
		// not have reached Redis).
		case !errors.Is(err, correctness.ErrInvalidKey) && !errors.Is(err, correctness.ErrInvalidTTL) &&
			!errors.Is(err, correctness.ErrLateGrant) && !errors.Is(err, correctness.ErrNotObtained):
			t.Fatalf("TryAcquire(%q, %v): got %v, want a lease or a sentinel error", trim(name), time.Duration(ttl), err)
		}

		_, before, _ := reg.Read(ctx, name)
		err = reg.Write(ctx, name, token, value)
		switch {
		case err == nil:
			if token < before {
				t.Fatalf("Write(%d) accepted with %d accepted before", token, before)
			}
			got, tok, err := reg.Read(ctx, name)
			if err != nil || string(got) != string(value) || tok != token {
				t.Fatalf("Read after Write(%d): got %q, %d, %v", token, trim(string(got)), tok, err)
			}
		case errors.Is(err, correctness.ErrStaleToken):
			if token >= before {
				t.Fatalf("Write(%d) rejected as stale with %d accepted before", token, before)
			}
		case !errors.Is(err, correctness.ErrInvalidKey) && !errors.Is(err, correctness.ErrInvalidToken):
			t.Fatalf("Write(%q, %d): got %v, want success or a sentinel error", trim(name), token, err)
		}
	})
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
