// Package pgtest gives leasekit's tests a PostgreSQL database: a fresh schema
// per test on the server that LEASEKIT_POSTGRES_URL names (.ci/test.sh
// starts a throwaway one, see .ci/postgres.sh), through the pgx driver's
// database/sql adapter.
//
// Without the variable a test that asks for PostgreSQL skips; with
// LEASEKIT_REQUIRE_REDIS=1 (real servers required, as .ci/test.sh and CI
// set it) it fails instead. LEASEKIT_NO_REDIS=1 (no real servers, as on a
// machine with only Go) makes it skip even with the variable set.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// URLEnv is the environment variable that names the PostgreSQL server, as a
// postgres:// URL.
const URLEnv = "LEASEKIT_POSTGRES_URL"

// Open returns a database whose search_path is a new, empty schema, dropped
// when the test ends, and the URL that reaches the same schema (for a child
// process). It skips or fails the test as the package doc says when there is
// no server.
func Open(t testing.TB) (*sql.DB, string) {
	t.Helper()
	base := os.Getenv(URLEnv)
	switch {
	case os.Getenv(redistest.NoServerEnv) == "1":
		t.Skipf("PostgreSQL hidden by %s=1", redistest.NoServerEnv)
	case base == "" && os.Getenv(redistest.RequireEnv) == "1":
		t.Fatalf("%s is not set and %s=1 requires a PostgreSQL server: run .ci/test.sh", URLEnv, redistest.RequireEnv)
	case base == "":
		t.Skipf("%s is not set: run .ci/test.sh for a throwaway PostgreSQL server", URLEnv)
	}
	admin := open(t, base)
	schema := "leasekit_" + randomHex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: CREATE SCHEMA %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: DROP SCHEMA %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", URLEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema) // pgx sends unknown parameters to the server as settings
	u.RawQuery = q.Encode()
	return open(t, u.String()), u.String()
}

// open opens a database at dsn, checks that it answers, and closes it when
// the test ends (before the cleanups registered earlier run).
func open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("pgtest: the server at %s does not answer: %v", URLEnv, err)
	}
	return db
}

func randomHex(t testing.TB) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
