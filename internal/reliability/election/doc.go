// Package election holds the tests of correctness's election with
// candidates as real processes: a leader killed with -9, and one frozen
// with SIGSTOP past its lease whose writes, once it resumes, every fence
// refuses (a Register, ExecFenced on a SQLite file, a FencingProxy). They
// live in this module, not beside the election, for the SQL driver the
// library's go.mod does not require.
//
// The package has no code of its own: everything is in its tests.
package election
