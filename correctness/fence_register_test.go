package correctness_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestRegisterFences(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		reg := correctness.NewRegister(b.Client)
		if v, tok, err := reg.Read(ctx, "account"); v != nil || tok != 0 || err != nil {
			t.Fatalf("Read of a new resource: got %q, %d, %v, want nil, 0, nil", v, tok, err)
		}
		steps := []struct {
			token uint64
			value string
			stale bool
		}{
			{34, "B", false},
			{34, "B again", false}, // the same grant writing twice
			{33, "A", true},
			{1_795_974_129_470_711, "clock-floor token", false},
			{1_795_974_129_470_710, "one below", true},
		}
		want, wantTok := "", uint64(0)
		for _, s := range steps {
			err := reg.Write(ctx, "account", s.token, []byte(s.value))
			if s.stale {
				var stale *correctness.StaleTokenError
				if !errors.As(err, &stale) || !errors.Is(err, correctness.ErrStaleToken) {
					t.Fatalf("Write(%d): got %v, want a *StaleTokenError", s.token, err)
				}
				if stale.Token != s.token || stale.Highest != wantTok {
					t.Fatalf("Write(%d): got Token %d Highest %d, want %d and %d", s.token, stale.Token, stale.Highest, s.token, wantTok)
				}
			} else {
				if err != nil {
					t.Fatalf("Write(%d): %v", s.token, err)
				}
				want, wantTok = s.value, s.token
			}
			v, tok, err := reg.Read(ctx, "account")
			if err != nil || string(v) != want || tok != wantTok {
				t.Fatalf("after Write(%d): Read got %q, %d, %v, want %q, %d", s.token, v, tok, err, want, wantTok)
			}
		}
	})
}

func TestRegisterConcurrentWriters(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		reg := correctness.NewRegister(b.Client)
		const writers, writes = 32, 50
		type result struct {
			token    uint64
			accepted bool
			highest  uint64
		}
		results := make(chan result, writers*writes)
		errs := make(chan error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range writes {
					token := uint64(rand.IntN(1000) + 1)
					err := reg.Write(ctx, "shared", token, fmt.Appendf(nil, "%d/%d/%d", w, i, token))
					var stale *correctness.StaleTokenError
					switch {
					case err == nil:
						results <- result{token: token, accepted: true}
					case errors.As(err, &stale):
						results <- result{token: token, highest: stale.Highest}
					default:
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(results)
		close(errs)
		for err := range errs {
			t.Fatalf("Write: %v", err)
		}
		var most uint64
		for r := range results {
			most = max(most, r.token)
			if !r.accepted && r.highest <= r.token {
				t.Errorf("token %d rejected with highest %d: only an older token may be rejected", r.token, r.highest)
			}
		}
		v, tok, err := reg.Read(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		if tok != most {
			t.Fatalf("final token: got %d, want the highest written, %d", tok, most)
		}
		var w, i int
		var vt uint64
		if _, err := fmt.Sscanf(string(v), "%d/%d/%d", &w, &i, &vt); err != nil || vt != most {
			t.Fatalf("final value %q: want one written with token %d", v, most)
		}
	})
}
