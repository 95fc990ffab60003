// Package deps holds the library's module list to the code: the modules a
// program that imports leasekit resolves are go-redis, the OpenTelemetry
// API, and what the library's packages import (miniredis for leasetest,
// gocron for cron/gocronlock), each with the modules they need in turn.
// Its test fails on a module outside the list; a module that tests alone
// need belongs in the reliability module (CONTRIBUTING.md, "Three
// modules").
//
// The package has no code of its own: everything is in its test.
package deps
