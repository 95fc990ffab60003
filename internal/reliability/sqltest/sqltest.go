// Package sqltest gives tests the table that correctness.ExecFenced's doc
// shows, and its statements, on a SQLite file (modernc.org/sqlite) and on a
// PostgreSQL schema (pgtest). Its drivers are why it lives in this module:
// the library's go.mod requires neither.
package sqltest

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/pgtest"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

// The schema and statements that ExecFenced's doc shows: the tests run them
// verbatim.
const (
	// Schema creates the table.
	Schema = `CREATE TABLE protected_resource (
    resource_id   TEXT PRIMARY KEY,
    value         TEXT NOT NULL,
    fencing_token BIGINT NOT NULL DEFAULT 0
)`
	// CreateRow creates the row $1, with token 0, unless it exists.
	CreateRow = `INSERT INTO protected_resource (resource_id, value, fencing_token)
VALUES ($1, '', 0)
ON CONFLICT (resource_id) DO NOTHING`
	// Update writes $1 to the row $3 with the token $2.
	Update = `UPDATE protected_resource
SET value = $1,
    fencing_token = $2
WHERE resource_id = $3
  AND fencing_token <= $2`
	// Claim claims the row $2 with the token $1 and returns its value.
	Claim = `UPDATE protected_resource
SET fencing_token = $1
WHERE resource_id = $2
  AND fencing_token <= $1
RETURNING value`
)

// OpenFile opens the SQLite database file at path, which another process
// may open too. busy_timeout makes a writer wait for the write lock instead
// of failing with SQLITE_BUSY; WAL lets readers run beside the writer.
func OpenFile(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	// SQLite runs one writer at a time anyway; a few connections are enough
	// to make writers contend inside the database, not only in the pool.
	if err == nil {
		db.SetMaxOpenConns(8)
	}
	return db, err
}

// SQLite returns a file database with the table, closed when the test
// ends: a file, so that concurrent writers go through SQLite's real locking
// rather than one shared in-memory connection.
func SQLite(t testing.TB) *sql.DB {
	t.Helper()
	db, err := OpenFile(filepath.Join(t.TempDir(), "fence.db"))
	if err != nil {
		t.Fatalf("sqltest: open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(t.Context(), Schema); err != nil {
		t.Fatalf("sqltest: create table: %v", err)
	}
	return db
}

// Run runs body on a SQLite file database and on a PostgreSQL schema, as
// subtests named after them, each with the table.
func Run(t *testing.T, body func(t *testing.T, db *sql.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { body(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) {
		db, _ := pgtest.Open(t)
		if _, err := db.ExecContext(t.Context(), Schema); err != nil {
			t.Fatalf("sqltest: create table: %v", err)
		}
		body(t, db)
	})
}

// Create creates the row id, with token 0, unless it exists.
func Create(t testing.TB, db *sql.DB, id string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), CreateRow, id); err != nil {
		t.Fatalf("sqltest: create row %q: %v", id, err)
	}
}

// Read returns the value and token of the row id.
func Read(t testing.TB, db *sql.DB, id string) (value string, token uint64) {
	t.Helper()
	err := db.QueryRowContext(t.Context(),
		`SELECT value, fencing_token FROM protected_resource WHERE resource_id = $1`, id).Scan(&value, &token)
	if err != nil {
		t.Fatalf("sqltest: read row %q: %v", id, err)
	}
	return value, token
}
