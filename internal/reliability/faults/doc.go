// Package faults holds leasekit's fault-injection tests: real redis-server
// processes started by internal/testkit/redistest, and the network faults of
// internal/testkit/faultproxy between them and the lock clients. It has no code
// of its own; every file but this one is a test. docs/reliability.md says what
// each test injects and what leasekit guarantees under it.
package faults
