package correctness

import (
	"sync"

	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leasekit/leasekit/internal/telemetry"
)

// Execer runs a statement that returns no rows. *sql.DB, *sql.Tx and
// *sql.Conn implement it, so a fenced write can run alone or inside the
// caller's transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var (
	_ Execer = (*sql.DB)(nil)
	_ Execer = (*sql.Tx)(nil)
	_ Execer = (*sql.Conn)(nil)
)

// ExecFenced runs query, a conditional UPDATE that writes only when the
// writer's token is at least the token stored with the row, and returns nil
// only if it wrote. The check and the write are one statement, so the database
// makes them atomic: no other writer can store a newer token between them.
//
// The protected row carries its highest accepted token:
//
//	CREATE TABLE protected_resource (
//	    resource_id   TEXT PRIMARY KEY,
//	    value         TEXT NOT NULL,
//	    fencing_token BIGINT NOT NULL DEFAULT 0
//	);
//
// and every write to it goes through ExecFenced with the UPDATE:
//
//	UPDATE protected_resource
//	SET value = $1,
//	    fencing_token = $2
//	WHERE resource_id = $3
//	  AND fencing_token <= $2;
//
//	err := correctness.ExecFenced(ctx, db, update, value, lease.Token(), id)
//
// An equal token is accepted: a token belongs to one grant, so it is the same
// holder writing again. When no row was affected, the error matches
// ErrStaleToken: the token was older than the stored one or the row does not
// exist, and the statement cannot tell which. So create the row, with
// fencing_token 0, before the first fenced write (INSERT ... ON CONFLICT DO
// NOTHING), and never write fencing_token any other way: an upsert that resets
// it, or one write path without the condition, lets a superseded holder write
// again. A driver error is returned wrapped; so is a driver that cannot report
// the rows affected, because then the fence cannot be checked.
//
// Pass the token as a uint64 or int64: database/sql, like a BIGINT column,
// holds at most 1<<63 - 1, far above any token a Locker issues.
func ExecFenced(ctx context.Context, db Execer, query string, args ...any) error {
	if isNilExecer(db) {
		return errors.New("correctness: fenced exec: nil Execer")
	}
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("correctness: fenced exec: %w", err)
	}
	if res == nil {
		return errors.New("correctness: fenced exec: driver returned no result")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("correctness: fenced exec: rows affected unknown, the fence cannot be checked: %w", err)
	}
	if n == 0 {
		fenceTelemetry().Rejected(ctx, "sql")
		return fmt.Errorf("%w: no row updated: the token is older than the stored one, or the row does not exist", ErrStaleToken)
	}
	return nil
}

// fenceTelemetry counts the writes that ExecFenced and a FencingProxy
// without WithProxyMeterProvider reject, on the global meter provider.
var fenceTelemetry = sync.OnceValue(func() *telemetry.Telemetry {
	return telemetry.New(telemetry.Config{Kind: "correctness"})
})

// isNilExecer catches the nil pointers a caller can hold in an Execer, whose
// methods would panic instead of returning an error.
func isNilExecer(db Execer) bool {
	switch v := db.(type) {
	case nil:
		return true
	case *sql.DB:
		return v == nil
	case *sql.Tx:
		return v == nil
	case *sql.Conn:
		return v == nil
	}
	return false
}
