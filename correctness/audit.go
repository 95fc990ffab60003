package correctness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/redis/go-redis/v9"
)

// Status is the outcome of one audit check.
type Status int

const (
	// StatusOK means the check ran and found nothing that threatens tokens or
	// leases.
	StatusOK Status = iota
	// StatusRisk means the check found a setting under which tokens can go
	// back or a lease can be granted twice.
	StatusRisk
	// StatusUnverified means the check could not run (miniredis, or an ACL
	// that denies CONFIG or INFO) or could not tell. It is never reported as
	// OK.
	StatusUnverified
)

// String returns "ok", "risk" or "could not verify".
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusRisk:
		return "risk"
	case StatusUnverified:
		return "could not verify"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Finding is the result of one audit check.
type Finding struct {
	// Check names what was inspected: "persistence", "eviction",
	// "replication", "scripting" or "clock-floor".
	Check string
	// Status says whether it threatens token monotonicity or lease safety.
	Status Status
	// Detail says what was found and what it means.
	Detail string
}

// Audit inspects the live deployment, in one round trip, for what threatens
// token monotonicity or lease safety:
//
//   - persistence: only AOF with appendfsync always is OK; otherwise a restart
//     loses the counter or recent grants.
//   - eviction: only maxmemory-policy noeviction is OK; otherwise a lock or
//     its counter can be evicted.
//   - replication: replicas are replicated asynchronously, so a failover can
//     lose grants.
//   - scripting: the client's ACL user must be allowed EVALSHA, which runs
//     every script, and EVAL, which runs it again once Redis has dropped its
//     script cache (a restart, a failover, SCRIPT FLUSH); without them
//     refreshes and releases fail with NOPERM, and locks stay held until
//     their ttl runs out.
//   - clock-floor: disabled is a risk; enabled, tokens depend on the server
//     clock never going back further than an outage lasted. With WithTokens
//     it is OK: the tokens do not depend on Redis. The other checks still
//     tell when Redis can grant a lock twice.
//
// A check that cannot run (miniredis, an ACL that denies CONFIG or INFO) is
// StatusUnverified, never OK. The error is for a Redis that cannot be reached
// or will not serve this client at all (wrong credentials, still loading).
func (l *Locker) Audit(ctx context.Context) ([]Finding, error) {
	l.mustExist("Audit")
	masters, err := l.conn.Masters(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("correctness: audit: %w", err)
	case masters == nil:
		return l.auditNode(ctx, l.conn)
	}
	return l.auditCluster(ctx, masters)
}

// auditNode runs every check against one server, in one pipeline.
func (l *Locker) auditNode(ctx context.Context, node port.Client) ([]Finding, error) {
	replies := node.Pipe(ctx, "",
		[]any{"CONFIG", "GET", "appendonly"},
		[]any{"CONFIG", "GET", "appendfsync"},
		[]any{"CONFIG", "GET", "maxmemory-policy"},
		[]any{"INFO", "replication"},
		[]any{"EVAL", probeScript, 0},
		[]any{"EVALSHA", unknownSHA, 0})
	// A command Redis refused is a finding ("could not verify"); a pipeline
	// that failed as a whole (the connection, or a handshake Redis refused)
	// is the audit's error.
	for _, r := range replies {
		if e := r.Err; e != nil && !refused(e) {
			return nil, fmt.Errorf("correctness: audit: %w", e)
		}
	}
	aof, fsync, policy, repl, eval, evalsha := replies[0], replies[1], replies[2], replies[3], replies[4], replies[5]
	return []Finding{
		persistence(aof, fsync),
		eviction(policy),
		replication(repl, l.opts.replicas, l.opts.replicaWait),
		scripting(eval, evalsha),
		l.clockFloor(),
	}, nil
}

// auditCluster audits every master and reports, per check, the worst status
// any of them has, naming the masters whose findings differ.
func (l *Locker) auditCluster(ctx context.Context, masters map[string]port.Client) ([]Finding, error) {
	var mu sync.Mutex
	perNode := make(map[string][]Finding)
	var wg sync.WaitGroup
	errs := make([]error, 0, len(masters))
	for addr, node := range masters {
		wg.Go(func() {
			fs, err := l.auditNode(ctx, node)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			perNode[addr] = fs
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	addrs := slices.Sorted(maps.Keys(perNode))
	if len(addrs) == 0 {
		return nil, errors.New("correctness: audit: the cluster has no masters")
	}
	merged := slices.Clone(perNode[addrs[0]])
	for i := range merged {
		details := make([]string, 0, len(addrs))
		same := true
		for _, addr := range addrs {
			f := perNode[addr][i]
			if severity(f.Status) > severity(merged[i].Status) {
				merged[i].Status = f.Status
			}
			same = same && f.Detail == perNode[addrs[0]][i].Detail
			details = append(details, addr+": "+f.Detail)
		}
		if same {
			merged[i].Detail = fmt.Sprintf("all %d masters: %s", len(addrs), merged[i].Detail)
		} else {
			merged[i].Detail = strings.Join(details, "; ")
		}
	}
	return merged, nil
}

// refused reports whether err is Redis refusing one command (an ACL that
// denies it, a server that does not know it): that check cannot run, and
// says so. A connection that failed, or that Redis would not serve at all
// (wrong credentials, a server still loading), is the audit's error.
func refused(err error) bool {
	if !lease.IsServerReply(err) {
		return false
	}
	for _, p := range []string{"WRONGPASS", "NOAUTH", "LOADING", "MASTERDOWN"} {
		if strings.HasPrefix(err.Error(), p) {
			return false
		}
	}
	return true
}

// severity orders statuses for merging: a risk outweighs what could not be
// verified, which outweighs ok.
func severity(s Status) int {
	switch s {
	case StatusRisk:
		return 2
	case StatusUnverified:
		return 1
	}
	return 0
}

func unverified(check string, err error) Finding {
	return Finding{check, StatusUnverified, "could not verify: " + err.Error()}
}

// configValue reads CONFIG GET name's reply: pairs, or a map (RESP3).
func configValue(r port.Reply, name string) (string, error) {
	if r.Err != nil {
		return "", r.Err
	}
	switch m := r.Val.(type) {
	case map[any]any:
		if v, ok := m[name].(string); ok {
			return v, nil
		}
	case map[string]any:
		if v, ok := m[name].(string); ok {
			return v, nil
		}
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			if k, _ := m[i].(string); k == name {
				if v, ok := m[i+1].(string); ok {
					return v, nil
				}
			}
		}
	}
	return "", fmt.Errorf("CONFIG GET %s returned nothing", name)
}

func persistence(aof, fsync port.Reply) Finding {
	const check = "persistence"
	on, err := configValue(aof, "appendonly")
	if err != nil {
		return unverified(check, err)
	}
	if on != "yes" {
		return Finding{check, StatusRisk, "appendonly is " + on + ": a restart loses the fence counters and the held locks " +
			"(the clock floor keeps tokens increasing unless the server clock goes back); set appendonly yes, appendfsync always"}
	}
	mode, err := configValue(fsync, "appendfsync")
	if err != nil {
		return unverified(check, err)
	}
	if mode != "always" {
		return Finding{check, StatusRisk, "appendfsync is " + mode + ": a crash can lose the last grants and counter increments; set appendfsync always"}
	}
	return Finding{check, StatusOK, "AOF with appendfsync always"}
}

func eviction(policy port.Reply) Finding {
	const check = "eviction"
	p, err := configValue(policy, "maxmemory-policy")
	if err != nil {
		return unverified(check, err)
	}
	if p != "noeviction" {
		return Finding{check, StatusRisk, "maxmemory-policy is " + p + ": under memory pressure Redis can evict a held lock " +
			"(granting it twice) or a fence counter; set noeviction"}
	}
	return Finding{check, StatusOK, "noeviction: a full server refuses writes instead of evicting locks"}
}

func replication(info port.Reply, want int, wait time.Duration) Finding {
	const check = "replication"
	text, ok := info.Val.(string)
	if err := info.Err; err != nil {
		return unverified(check, err)
	} else if !ok {
		return unverified(check, fmt.Errorf("INFO replication answered %T, not text", info.Val))
	}
	fields := infoFields(text)
	role, replicas := fields["role"], fields["connected_slaves"]
	if role == "" {
		return unverified(check, errors.New("INFO replication has no role"))
	}
	if role != "master" {
		return Finding{check, StatusRisk, "this server is a " + role + ": writes go to its master, and a failover can lose grants that were not replicated yet"}
	}
	n, _ := strconv.Atoi(replicas)
	if n == 0 {
		return Finding{check, StatusOK, "master without replicas: no failover can lose a grant (a restart still can; see persistence)"}
	}
	detail := fmt.Sprintf("%d replicas, replicated asynchronously: a failover can lose the last grants and counter increments", n)
	if want > 0 {
		detail += fmt.Sprintf("; WithReplicas(%d, %v) makes each grant wait for replicas, which narrows but does not close that window", want, wait)
	} else {
		detail += "; WithReplicas(n, timeout) makes each grant wait for n replicas"
	}
	return Finding{check, StatusRisk, detail}
}

// The scripting check runs a script that changes nothing, with EVAL, and asks
// EVALSHA for one that no server has: Redis checks the ACL before it looks
// the script up, so NOSCRIPT means EVALSHA is allowed.
const (
	probeScript = "return 1"
	unknownSHA  = "0000000000000000000000000000000000000000"
)

func scripting(eval, evalsha port.Reply) Finding {
	const check = "scripting"
	evalErr := eval.Err
	if n, err := port.Int64(eval.Val, eval.Err); evalErr == nil && (err != nil || n != 1) {
		evalErr = fmt.Errorf("EVAL %q answered %v, not 1", probeScript, eval.Val)
	}
	shaErr := evalsha.Err
	switch {
	case redis.HasErrorPrefix(shaErr, "NOSCRIPT"):
		shaErr = nil
	case shaErr == nil:
		shaErr = fmt.Errorf("EVALSHA %s answered %v, not NOSCRIPT", unknownSHA, evalsha.Val)
	}
	var risks []string
	if redis.IsPermissionError(evalErr) {
		risks = append(risks, "the ACL denies EVAL: once Redis drops its script cache (a restart, a failover, SCRIPT FLUSH), "+
			"refreshes and releases fail with NOPERM and held locks stay held until their ttl runs out; grant +eval")
	}
	if redis.IsPermissionError(shaErr) {
		risks = append(risks, "the ACL denies EVALSHA: every acquire, refresh and release fails with NOPERM; grant +evalsha")
	}
	switch {
	case len(risks) > 0:
		return Finding{check, StatusRisk, strings.Join(risks, "; ")}
	case evalErr != nil:
		return unverified(check, evalErr)
	case shaErr != nil:
		return unverified(check, shaErr)
	}
	return Finding{check, StatusOK, "the ACL allows EVAL and EVALSHA"}
}

func infoFields(text string) map[string]string {
	fields := make(map[string]string)
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			fields[k] = v
		}
	}
	return fields
}

func (l *Locker) clockFloor() Finding {
	const check = "clock-floor"
	if l.opts.tokens != nil {
		return Finding{check, StatusOK, "not needed: tokens come from the token source (WithTokens), not the Redis counter, " +
			"so Redis losing its state can grant a lock twice but not with a token that is not newer; " +
			"the fences refuse the older holder"}
	}
	if !l.opts.clockFloor {
		return Finding{check, StatusRisk, "disabled: a lost counter (restart, eviction, failover) starts tokens again from 1, " +
			"and a superseded holder's old token can then pass every fence"}
	}
	return Finding{check, StatusOK, "enabled: tokens are at least the server clock in µs, so they stay increasing after a lost counter " +
		"unless the server clock goes back further than the outage lasted"}
}
