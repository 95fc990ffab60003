package correctness

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"sync"

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
// caller's token is at least the token stored with the row, and returns nil
// only if it wrote. The check and the write are one statement, so the database
// makes them atomic: no other writer can store a newer token between them.
//
// The protected row carries the highest token that has claimed or written it:
//
//	CREATE TABLE protected_resource (
//	    resource_id   TEXT PRIMARY KEY,
//	    value         TEXT NOT NULL,
//	    fencing_token BIGINT NOT NULL DEFAULT 0
//	);
//
// A holder that reads the row and writes back what it computed claims the row
// first: it raises the row's token to its own before it reads, so that from
// then on a paused predecessor's write is refused, even before this holder
// writes. Where the database has UPDATE ... RETURNING (PostgreSQL, SQLite
// 3.35 and later), the claim is the read, through QueryRowFenced:
//
//	UPDATE protected_resource
//	SET fencing_token = $1
//	WHERE resource_id = $2
//	  AND fencing_token <= $1
//	RETURNING value;
//
//	token := correctness.TokenArg(lease.Token())
//	err := correctness.QueryRowFenced(ctx, db, claim, token, id).Scan(&value)
//
// Elsewhere, run that UPDATE without RETURNING through ExecFenced, then
// SELECT the row. Every write then goes through ExecFenced with the UPDATE:
//
//	UPDATE protected_resource
//	SET value = $1,
//	    fencing_token = $2
//	WHERE resource_id = $3
//	  AND fencing_token <= $2;
//
//	err := correctness.ExecFenced(ctx, db, update, value, token, id)
//
// An equal token is accepted: a token belongs to one grant, so it is the same
// holder writing again. When no row was affected, the error matches
// ErrStaleToken: the token was older than the stored one or the row does not
// exist, and the statement cannot tell which. So create the row, with
// fencing_token 0, before the first claim or write (INSERT ... ON CONFLICT DO
// NOTHING), and never write fencing_token any other way: an upsert that resets
// it, or one write path without the condition, lets a superseded holder write
// again. A driver error is returned wrapped; so is a driver that cannot report
// the rows affected, because then the fence cannot be checked.
//
// Pass the token as a TokenArg, wherever the statement takes it: so
// ExecFenced knows which argument is the token, and refuses, with
// ErrInvalidToken and before the statement runs, token 0 (which no grant
// carries, and which a fresh row's fencing_token 0 would let through), a
// token beyond a BIGINT, two different tokens, or none. A database has no
// server clock leasekit can compare a token with: the clock ceiling of
// Register and of FencingProxy's store does not apply here.
func ExecFenced(ctx context.Context, db Execer, query string, args ...any) error {
	if isNilExecer(db) {
		return errors.New("correctness: fenced exec: nil Execer")
	}
	if err := checkTokenArgs("fenced exec", args); err != nil {
		return err
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
		fenceTelemetry().Rejected(ctx, "sql", "stale")
		return fmt.Errorf("%w: no row updated: the token is older than the stored one, or the row does not exist", ErrStaleToken)
	}
	return nil
}

// Querier runs a statement that returns a row. *sql.DB, *sql.Tx and
// *sql.Conn implement it.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.DB)(nil)
	_ Querier = (*sql.Tx)(nil)
	_ Querier = (*sql.Conn)(nil)
)

// QueryRowFenced runs query, a conditional UPDATE ... RETURNING that changes
// the row only when the caller's token is at least the token stored with it:
// the claim that ExecFenced's doc shows, or a write that returns what it
// wrote. The row's Scan reports whether it did. The token is a TokenArg
// among args, checked before the statement runs, as ExecFenced checks it.
func QueryRowFenced(ctx context.Context, db Querier, query string, args ...any) *FencedRow {
	if isNilExecer(db) {
		return &FencedRow{err: errors.New("correctness: fenced query: nil Querier")}
	}
	if err := checkTokenArgs("fenced query", args); err != nil {
		return &FencedRow{err: err}
	}
	return &FencedRow{ctx: ctx, row: db.QueryRowContext(ctx, query, args...)}
}

// FencedRow is the row of a QueryRowFenced.
type FencedRow struct {
	ctx context.Context
	row *sql.Row
	err error
}

// Scan copies the returned row's columns into dest, as sql.Row's Scan does.
// When the statement returned no row, the error matches ErrStaleToken: the
// token was older than the stored one, or the row does not exist. A driver
// error is returned wrapped.
func (r *FencedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	err := r.row.Scan(dest...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		fenceTelemetry().Rejected(r.ctx, "sql", "stale")
		return fmt.Errorf("%w: no row returned: the token is older than the stored one, or the row does not exist", ErrStaleToken)
	case err != nil:
		return fmt.Errorf("correctness: fenced query: %w", err)
	}
	return nil
}

// TokenArg is a fencing token as an argument of ExecFenced's or
// QueryRowFenced's statement: correctness.TokenArg(lease.Token()). It goes
// to the database as a BIGINT, which holds at most 1<<63 - 1, far above any
// token a Locker issues.
type TokenArg uint64

// Value makes a TokenArg a database/sql argument: an int64, or an error
// matching ErrInvalidToken for a token beyond a BIGINT.
func (t TokenArg) Value() (driver.Value, error) {
	if t > math.MaxInt64 {
		return nil, fmt.Errorf("%w: token %d is beyond a BIGINT (at most %d)", ErrInvalidToken, uint64(t), int64(math.MaxInt64))
	}
	return int64(t), nil
}

// checkTokenArgs checks the token among the arguments of a fenced
// statement, for op: the statement's condition cannot tell a token no grant
// carries from an old one, and a fresh row's token 0 lets token 0 through.
func checkTokenArgs(op string, args []any) error {
	var token TokenArg
	at := 0 // the first TokenArg's position, from 1
	for i, arg := range args {
		t, ok := arg.(TokenArg)
		if !ok {
			continue
		}
		if t == 0 {
			return fmt.Errorf("%w: %s: argument %d is token 0, which no grant carries", ErrInvalidToken, op, i+1)
		}
		if t > math.MaxInt64 {
			return fmt.Errorf("%w: %s: argument %d is token %d, beyond a BIGINT", ErrInvalidToken, op, i+1, t)
		}
		if at != 0 && t != token {
			return fmt.Errorf("%w: %s: arguments %d and %d are two tokens, %d and %d", ErrInvalidToken, op, at, i+1, token, t)
		}
		if at == 0 {
			token, at = t, i+1
		}
	}
	if at == 0 {
		return fmt.Errorf("%w: %s: no argument is a TokenArg: pass the token as correctness.TokenArg(token), so that the fence can check it", ErrInvalidToken, op)
	}
	return nil
}

// fenceTelemetry counts the refusals of ExecFenced, QueryRowFenced and a
// FencingProxy without WithProxyMeterProvider, on the global meter provider.
var fenceTelemetry = sync.OnceValue(func() *telemetry.Telemetry {
	return telemetry.New(telemetry.Config{Kind: "correctness"})
})

// isNilExecer catches the nil pointers a caller can hold in an Execer or a
// Querier, whose methods would panic instead of returning an error.
func isNilExecer(db any) bool {
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
