// Package fencesql holds the tests of correctness's SQL fence (ExecFenced,
// QueryRowFenced, TokenArg) on a real database: a SQLite file and a
// PostgreSQL schema, both through sqltest. They live in this module, not
// beside the fence, so that the library's go.mod requires no SQL driver.
//
// The package has no code of its own: everything is in its tests.
package fencesql
