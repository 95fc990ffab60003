// Package faults holds leasekit's fault-injection tests (issue 6): real
// redis-server processes started by internal/testkit/redistest, and the network
// faults of internal/testkit/faultproxy between them and the lock clients. It has no
// code of its own; every file but this one is a test.
//
// What each test injects, and what it asserts:
//
//   - TestCrashRestart: SIGKILL and restart of the lock server, without
//     persistence and with AOF (appendfsync always).
//   - TestFailoverLosesGrant: a replica fed through a frozen proxy is
//     promoted after the master dies with a grant it never replicated.
//   - TestLeaseLostBeforeServerExpiry, TestLateGrantNotReported: replies
//     delayed past the ttl, requests swallowed.
//   - TestAmbiguousAcquire, TestFailedAcquireLeavesNoGrant: the connection
//     cut after an acquire reached the server, and a deadline that hits
//     during an acquire.
package faults
