package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/correctness/etcdtokens"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The etcd subjects, with -etcd: leasekit's correctness lock drawing its
// fencing tokens from etcd (correctness-etcd), and etcd's own
// concurrency.Mutex on the same cluster (etcd-mutex), the lock a user would
// pick instead, its token the revision that granted it. They run in
// uncontended and in the convoys of this process, interleaved with the
// others, and the ping scenario measures a plain etcd Put beside the PINGs:
// one etcd round trip, one Raft commit, to read them against.

// etcdEndpointsEnv is the environment variable -etcd defaults to: the
// comma-separated client endpoints (host:port) of an etcd cluster, as
// .ci/etcd.sh exports them.
const etcdEndpointsEnv = "LEASEKIT_ETCD_ENDPOINTS"

// etcdDialTimeout bounds the etcd client's dial and the first requests that
// check the cluster answers.
const etcdDialTimeout = 5 * time.Second

// etcdPutName is the etcd round-trip reference of the ping scenario.
const etcdPutName = "etcd Put"

// errNoEtcd is what opening an etcd subject without -etcd says.
var errNoEtcd = errors.New("needs -etcd (or " + etcdEndpointsEnv + "), the endpoints of an etcd cluster")

// etcdCluster is the etcd cluster of -etcd: the one client that the etcd
// subjects and the etcd Put reference share, as one process's users would,
// and the count of its round trips.
type etcdCluster struct {
	endpoints []string
	client    *clientv3.Client
	// desc says what the cluster is, for the header: read when dialled.
	desc string
	// trips counts the client's unary RPCs. A watch or a lease keep-alive
	// runs on a stream, and is not one.
	trips atomic.Int64
	// took are the durations of those RPCs, in the order they ended.
	mu   sync.Mutex
	took samples
}

// dialEtcd opens a client of the cluster at endpoints and checks that it
// answers: every endpoint's status, and the member list.
func dialEtcd(endpoints []string) (*etcdCluster, error) {
	e := &etcdCluster{endpoints: endpoints}
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoke(ctx, method, req, reply, cc, opts...)
		took := time.Since(start)
		e.trips.Add(1)
		e.mu.Lock()
		e.took = append(e.took, took)
		e.mu.Unlock()
		return err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: etcdDialTimeout,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)},
	})
	if err != nil {
		return nil, fmt.Errorf("-etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	e.client = cli
	ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout)
	defer cancel()
	version := "(version unknown)"
	for _, ep := range endpoints {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("-etcd: the status of %s: %w", ep, err)
		}
		version = st.Version
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("-etcd %s: the member list: %w", strings.Join(endpoints, ","), err)
	}
	e.desc = fmt.Sprintf("etcd %s, %d members, endpoints %s; go.etcd.io/etcd/client/v3 %s: one client shared by the etcd subjects and the etcd Put reference",
		version, len(members.Members), strings.Join(endpoints, ","), moduleVersion("go.etcd.io/etcd/client/v3"))
	return e, nil
}

func (e *etcdCluster) close() { _ = e.client.Close() }

// etcdPrefixes are the prefixes of every etcd key that the run called id
// makes: its mutexes' and the Put reference's, and its locks' token keys.
func etcdPrefixes(id string) []string {
	return []string{"bench:" + id + ":", etcdtokens.DefaultPrefix + "bench:" + id + ":"}
}

// cleanup deletes every etcd key the run called id made, and returns how
// many.
func (e *etcdCluster) cleanup(ctx context.Context, id string) (int64, error) {
	var n int64
	var errs []error
	for _, p := range etcdPrefixes(id) {
		resp, err := e.client.Delete(ctx, p, clientv3.WithPrefix())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n += resp.Deleted
	}
	return n, errors.Join(errs...)
}

// etcdTrips is how many round trips the etcd client has made so far; 0
// without -etcd.
func (b *bench) etcdTrips() int64 {
	if b.target.etcd == nil {
		return 0
	}
	return b.target.etcd.trips.Load()
}

// etcdTook returns the durations of the etcd client's round trips that
// ended after mark (0 at the start), and the mark for the next call; none
// without -etcd.
func (b *bench) etcdTook(mark int) (samples, int) {
	e := b.target.etcd
	if e == nil {
		return nil, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.took[mark:]), len(e.took)
}

// etcdPutSubject is the etcd round-trip reference: a Put of one key.
func (b *bench) etcdPutSubject() subject {
	cli := b.target.etcd.client
	return subject{name: etcdPutName, ref: true, op: func(ctx context.Context, key string) error {
		_, err := cli.Put(ctx, key, "1")
		return err
	}}
}

// hasEtcdRows reports whether the scenario called name has rows of the etcd
// subjects, with -etcd: the ping scenario's etcd Put reference, and the
// etcd libraries' rows.
func hasEtcdRows(name string) bool { return name == "ping" || etcdRunsIn(name) }

// etcdRunsIn reports whether the etcd libraries run in the scenario called
// name: uncontended and the convoys of this process. convoy-procs's workers
// and keys-parallel's 64 goroutines measure what Redis serves.
func etcdRunsIn(name string) bool { return name == "uncontended" || isConvoyN(name) }

// isConvoyN reports whether name is a convoy of N in this process.
func isConvoyN(name string) bool {
	return strings.HasPrefix(name, "convoy-") && name != "convoy-procs"
}

// openCorrectnessEtcd opens leasekit's correctness lock with its tokens
// drawn from the -etcd cluster.
func openCorrectnessEtcd(t *target, client redis.UniversalClient, ttl time.Duration) (locker, error) {
	if t.etcd == nil {
		return nil, fmt.Errorf("correctness-etcd: %w", errNoEtcd)
	}
	l := correctness.New(client, correctness.WithAudit(false), correctness.WithTokens(etcdtokens.New(t.etcd.client)))
	return adapter[*correctness.Lease]{obtain: l.Acquire, stop: l.Close, ttl: ttl}, nil
}

// openEtcdMutex opens etcd's concurrency.Mutex on the -etcd cluster, with
// sessions of the run's ttl.
func openEtcdMutex(t *target, _ redis.UniversalClient, ttl time.Duration) (locker, error) {
	if t.etcd == nil {
		return nil, fmt.Errorf("etcd-mutex: %w", errNoEtcd)
	}
	return &etcdMutex{cli: t.etcd.client, ttl: etcdSessionTTL(ttl)}, nil
}

// etcdSessionTTL is ttl in whole seconds, at least one: a session's TTL.
func etcdSessionTTL(ttl time.Duration) int { return max(int(ttl/time.Second), 1) }

// etcdMutex is etcd's concurrency.Mutex as a locker. A Mutex is owned by its
// session (its key is the prefix and the session's lease), so contenders
// that share a session all own the lock at once: each acquisition takes a
// session of its own from a pool, as each of a user's processes has one,
// and its release gives it back. The pool grows on demand; prepare opens
// the sessions of a convoy before it is timed.
type etcdMutex struct {
	cli *clientv3.Client
	ttl int // the sessions' TTL, in seconds

	mu   sync.Mutex
	idle []*concurrency.Session
	all  []*concurrency.Session
}

// preparer is a locker that can ready itself, untimed, for n acquisitions
// at once.
type preparer interface {
	prepare(n int) error
}

// prepare opens sessions until n are idle.
func (m *etcdMutex) prepare(n int) error {
	m.mu.Lock()
	need := n - len(m.idle)
	m.mu.Unlock()
	var opened []*concurrency.Session
	for range need {
		s, err := m.open()
		if err != nil {
			return err
		}
		opened = append(opened, s)
	}
	m.mu.Lock()
	m.idle = append(m.idle, opened...)
	m.mu.Unlock()
	return nil
}

// open opens a session of the pool (its lease granted, its keep-alives
// running), not yet idle. Its lease lives until close, whatever the
// context of the acquisition that opened it.
func (m *etcdMutex) open() (*concurrency.Session, error) {
	s, err := concurrency.NewSession(m.cli, concurrency.WithTTL(m.ttl))
	if err != nil {
		return nil, fmt.Errorf("etcd-mutex: a session: %w", err)
	}
	m.mu.Lock()
	m.all = append(m.all, s)
	m.mu.Unlock()
	return s, nil
}

// session takes an idle session whose lease is alive, or opens one.
func (m *etcdMutex) session() (*concurrency.Session, error) {
	m.mu.Lock()
	for len(m.idle) > 0 {
		s := m.idle[len(m.idle)-1]
		m.idle = m.idle[:len(m.idle)-1]
		select {
		case <-s.Done(): // its lease ended: keep-alives failed
			continue
		default:
		}
		m.mu.Unlock()
		return s, nil
	}
	m.mu.Unlock()
	return m.open()
}

// done gives s back to the pool; a session whose acquisition or release
// failed is closed instead, which revokes its lease and so deletes any key
// it left under a lock's prefix.
func (m *etcdMutex) done(s *concurrency.Session, failed bool) {
	m.mu.Lock()
	if !failed {
		m.idle = append(m.idle, s)
		m.mu.Unlock()
		return
	}
	m.all = slices.DeleteFunc(m.all, func(o *concurrency.Session) bool { return o == s })
	m.mu.Unlock()
	_ = s.Close()
}

func (m *etcdMutex) acquire(ctx context.Context, key string) (held, error) {
	s, err := m.session()
	if err != nil {
		return nil, err
	}
	mu := concurrency.NewMutex(s, key)
	if err := mu.Lock(ctx); err != nil {
		m.done(s, true)
		return nil, err
	}
	return &etcdHeld{pool: m, s: s, mu: mu}, nil
}

// close closes every session of the pool, revoking its lease.
func (m *etcdMutex) close() error {
	m.mu.Lock()
	all := m.all
	m.all, m.idle = nil, nil
	m.mu.Unlock()
	for _, s := range all {
		_ = s.Close()
	}
	return nil
}

// etcdHeld is a held concurrency.Mutex, with the session it holds it by.
type etcdHeld struct {
	pool *etcdMutex
	s    *concurrency.Session
	mu   *concurrency.Mutex
}

// Token is the mutex's fencing token: the revision of the response that
// granted it.
func (h *etcdHeld) Token() uint64 { return uint64(h.mu.Header().Revision) }

func (h *etcdHeld) Release(ctx context.Context) error {
	err := h.mu.Unlock(ctx)
	h.pool.done(h.s, err != nil)
	return err
}
