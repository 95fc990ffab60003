// Package etcdtokens draws the fencing tokens of leasekit's correctness locks
// and elections from etcd, a consensus store, instead of a counter in Redis:
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	...
//	locker := correctness.New(rdb, correctness.WithTokens(etcdtokens.New(cli)))
//
// The lock itself (waiting, the queue's handoff, refreshes, releases) stays
// in Redis. Each grant costs one etcd transaction more, which Raft commits
// on a quorum of members before it answers; in exchange a token is greater
// than every token drawn before it for the lock, whatever Redis does: a
// restart without persistence, a failover that lost writes, a server clock
// stepped back, FLUSHALL. What that guarantees, and what it does not:
// docs/fencing.md in the leasekit repository.
//
// It is a module of its own, so that a program that does not choose it
// builds nothing of etcd's.
//
// # The token
//
// Each lock has a key in etcd, <prefix><lock name>. A grant's transaction
// writes it (a put that keeps its value) and the token is the revision of
// that write plus the key's base: the revision is etcd's own counter of
// writes, which grows with every write to the cluster and never goes back
// (Raft orders every write, and a member that loses its leadership cannot
// commit one), so it needs no read before the write and no retry when two
// writers race. The base is the value the first grant stored when it created
// the key: the token the lock's Redis counter gave that grant. So a lock
// that switches from the Redis counter to etcd keeps tokens above every one
// Redis issued it, and the fences need no reset.
//
// Do not delete the keys (as the Redis counters, they must live as long as
// the fences that saw their tokens), and do not restore the cluster from a
// snapshot older than the last grant without bumping its revision
// (etcdutl snapshot restore --bump-revision): either can make a token
// smaller than one drawn before. etcd compaction does not touch revisions.
package etcdtokens

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/leasekit/leasekit/correctness"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the prefix of the etcd keys of a Source without
// WithPrefix.
const DefaultPrefix = "leasekit/tokens/"

// Source issues fencing tokens from etcd: pass it to
// correctness.WithTokens. It is safe for concurrent use.
type Source struct {
	kv     clientv3.KV
	prefix string
}

var _ correctness.TokenSource = (*Source)(nil)

// Option configures a Source.
type Option func(*Source)

// WithPrefix sets the prefix of the etcd key of every lock: a lock called
// name draws its tokens from the key <prefix><name>. Default: DefaultPrefix.
func WithPrefix(prefix string) Option { return func(s *Source) { s.prefix = prefix } }

// New returns a Source that draws tokens through cli (a *clientv3.Client, or
// any clientv3.KV, such as a namespace.NewKV). It panics if cli is nil, as
// correctness.New does for a nil Redis client.
func New(cli clientv3.KV, opts ...Option) *Source {
	if cli == nil {
		panic("etcdtokens: New: nil etcd client")
	}
	s := &Source{kv: cli, prefix: DefaultPrefix}
	for _, opt := range opts {
		if opt != nil {
			opt(s)
		}
	}
	return s
}

// Key is the etcd key that the lock called name draws its tokens from.
func (s *Source) Key(name string) string { return s.prefix + name }

// Token returns a new token for the lock called name, in one transaction:
// it writes the lock's key, creating it with floor as its base if it does not
// exist, and returns the write's revision plus the base. floor 0 counts as 1.
// A failure names the lock and the key, and wraps etcd's error.
func (s *Source) Token(ctx context.Context, name string, floor uint64) (uint64, error) {
	key := s.Key(name)
	base := strconv.FormatUint(max(floor, 1), 10)
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, base)).
		Else(clientv3.OpPut(key, "", clientv3.WithIgnoreValue(), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcdtokens: draw a token for lock %q (etcd key %q): %w", name, key, err)
	}
	if !resp.Succeeded {
		// The key existed: its base is what the put kept.
		var prev []byte
		if len(resp.Responses) == 1 {
			if put := resp.Responses[0].GetResponsePut(); put != nil && put.PrevKv != nil {
				prev = put.PrevKv.Value
			}
		}
		b, err := strconv.ParseUint(string(prev), 10, 64)
		if err != nil || b == 0 {
			return 0, fmt.Errorf("etcdtokens: draw a token for lock %q: etcd key %q holds %q, not a token base (a positive decimal integer)",
				name, key, truncate(prev))
		}
		base = string(prev)
	}
	b, _ := strconv.ParseUint(base, 10, 64)
	rev := resp.Header.GetRevision()
	if rev <= 0 || b >= math.MaxInt64-uint64(rev) {
		return 0, fmt.Errorf("etcdtokens: draw a token for lock %q: base %d (etcd key %q) plus revision %d is not below 2^63-1",
			name, b, key, rev)
	}
	return b + uint64(rev), nil
}

// truncate is at most 40 bytes of v, for an error message.
func truncate(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "…"
	}
	return string(v)
}
