// Package rmw holds leasekit's read-modify-write check: worker processes
// increment one counter under one correctness lock through each fence
// (Register, SQLite, PostgreSQL, FencingProxy) while the test SIGSTOPs
// holders past their ttl, and every acknowledged increment must be in the
// final value. The same run with plain reads instead of claims must lose
// increments, so that the check is seen to fail where it should.
//
// The package has no code of its own: everything is in its tests, which run
// on the real redis-server the test harness starts and on the PostgreSQL
// server .ci/test.sh starts (LEASEKIT_POSTGRES_URL).
package rmw
