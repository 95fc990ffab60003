package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/reliability/sqltest"
)

func TestExecFencedSequence(t *testing.T) {
	sqltest.Run(t, func(t *testing.T, db *sql.DB) {
		sqltest.Create(t, db, "job")

		// Each step runs on the row the previous steps left behind.
		steps := []struct {
			name      string
			token     uint64
			value     string
			wantStale bool
			wantValue string
			wantToken uint64
		}{
			{name: "first token", token: 5, value: "a", wantValue: "a", wantToken: 5},
			{name: "equal token", token: 5, value: "b", wantValue: "b", wantToken: 5},
			{name: "newer token", token: 7, value: "c", wantValue: "c", wantToken: 7},
			{name: "older token", token: 6, value: "d", wantStale: true, wantValue: "c", wantToken: 7},
			{name: "much older token", token: 1, value: "e", wantStale: true, wantValue: "c", wantToken: 7},
			{name: "newer after a rejection", token: 8, value: "f", wantValue: "f", wantToken: 8},
		}
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				err := correctness.ExecFenced(t.Context(), db, sqltest.Update, s.value, correctness.TokenArg(s.token), "job")
				if got := errors.Is(err, correctness.ErrStaleToken); got != s.wantStale {
					t.Errorf("errors.Is(%v, ErrStaleToken) = %v, want %v", err, got, s.wantStale)
				}
				if !s.wantStale && err != nil {
					t.Errorf("got %v, want nil", err)
				}
				value, token := sqltest.Read(t, db, "job")
				if value != s.wantValue || token != s.wantToken {
					t.Errorf("got row (%q, %d), want (%q, %d)", value, token, s.wantValue, s.wantToken)
				}
			})
		}
	})
}

func TestExecFencedMissingRow(t *testing.T) {
	sqltest.Run(t, func(t *testing.T, db *sql.DB) {
		err := correctness.ExecFenced(t.Context(), db, sqltest.Update, "v", correctness.TokenArg(1), "never-created")
		if !errors.Is(err, correctness.ErrStaleToken) {
			t.Errorf("got %v, want ErrStaleToken", err)
		}
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM protected_resource`).Scan(&n); err != nil {
			t.Fatalf("count: %v", err)
		}
		if n != 0 {
			t.Errorf("got %d rows, want 0: a fenced UPDATE must not create the row", n)
		}
	})
}

// TestExecFencedCreateRowKeepsToken shows why the row is created with ON
// CONFLICT DO NOTHING: creating it again must not reset the stored token.
func TestExecFencedCreateRowKeepsToken(t *testing.T) {
	sqltest.Run(t, func(t *testing.T, db *sql.DB) {
		sqltest.Create(t, db, "job")
		if err := correctness.ExecFenced(t.Context(), db, sqltest.Update, "new", correctness.TokenArg(9), "job"); err != nil {
			t.Fatalf("fenced write: %v", err)
		}
		sqltest.Create(t, db, "job")
		err := correctness.ExecFenced(t.Context(), db, sqltest.Update, "old", correctness.TokenArg(3), "job")
		if !errors.Is(err, correctness.ErrStaleToken) {
			t.Errorf("got %v, want ErrStaleToken", err)
		}
		if value, token := sqltest.Read(t, db, "job"); value != "new" || token != 9 {
			t.Errorf("got row (%q, %d), want (%q, %d)", value, token, "new", 9)
		}
	})
}

func TestExecFencedInTx(t *testing.T) {
	sqltest.Run(t, func(t *testing.T, db *sql.DB) {
		sqltest.Create(t, db, "job")
		if err := correctness.ExecFenced(t.Context(), db, sqltest.Update, "current", correctness.TokenArg(4), "job"); err != nil {
			t.Fatalf("fenced write: %v", err)
		}

		tests := []struct {
			name      string
			token     uint64
			wantStale bool
			wantValue string
		}{
			{name: "stale rolls back", token: 3, wantStale: true, wantValue: "current"},
			{name: "newer commits", token: 5, wantValue: "tx 5"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tx, err := db.BeginTx(t.Context(), nil)
				if err != nil {
					t.Fatalf("begin: %v", err)
				}
				defer tx.Rollback()
				// The fenced write goes first: once it passes, the rest of the
				// transaction runs under the newest token or not at all.
				err = correctness.ExecFenced(t.Context(), tx, sqltest.Update, fmt.Sprintf("tx %d", tt.token), correctness.TokenArg(tt.token), "job")
				if got := errors.Is(err, correctness.ErrStaleToken); got != tt.wantStale {
					t.Fatalf("errors.Is(%v, ErrStaleToken) = %v, want %v", err, got, tt.wantStale)
				}
				if err == nil {
					if err := tx.Commit(); err != nil {
						t.Fatalf("commit: %v", err)
					}
				}
				if value, _ := sqltest.Read(t, db, "job"); value != tt.wantValue {
					t.Errorf("got value %q, want %q", value, tt.wantValue)
				}
			})
		}
	})
}

func TestExecFencedConcurrentWriters(t *testing.T) {
	sqltest.Run(t, func(t *testing.T, db *sql.DB) {
		const writers = 32
		sqltest.Create(t, db, "job")

		// Distinct tokens: two writers with one token would be one grant.
		tokens := distinctTokens(writers)
		maxToken := slices.Max(tokens)

		type outcome struct {
			token uint64
			err   error
		}
		start := make(chan struct{})
		results := make(chan outcome, writers)
		var wg sync.WaitGroup
		for _, token := range tokens {
			wg.Go(func() {
				<-start
				err := correctness.ExecFenced(t.Context(), db, sqltest.Update, fmt.Sprintf("written by %d", token), correctness.TokenArg(token), "job")
				results <- outcome{token, err}
			})
		}
		close(start)
		wg.Wait()
		close(results)

		accepted := 0
		for r := range results {
			switch {
			case r.err == nil:
				accepted++
			case errors.Is(r.err, correctness.ErrStaleToken):
				// A rejection is only right if a newer token was stored first,
				// and every stored token is at most the maximum.
				if r.token >= maxToken {
					t.Errorf("token %d rejected: got %v, want it accepted as the highest of %v", r.token, r.err, tokens)
				}
			default:
				t.Errorf("token %d: got %v, want nil or ErrStaleToken", r.token, r.err)
			}
		}
		if accepted == 0 {
			t.Errorf("got 0 writes accepted, want at least 1")
		}
		value, token := sqltest.Read(t, db, "job")
		if token != maxToken {
			t.Errorf("got stored token %d, want %d (the highest of %v)", token, maxToken, tokens)
		}
		if want := fmt.Sprintf("written by %d", maxToken); value != want {
			t.Errorf("got value %q, want %q", value, want)
		}
	})
}

// TestClaimAFirst is the read-modify-write story on a row: A claims and
// reads, pauses; B claims and reads the same value. A's write must be
// refused, though B has not written yet, and B's accepted. The claim runs
// both ways the doc shows: UPDATE ... RETURNING through QueryRowFenced, and
// a token-only UPDATE through ExecFenced before a SELECT.
func TestClaimAFirst(t *testing.T) {
	claims := map[string]func(ctx context.Context, db *sql.DB, token uint64, id string) (string, error){
		"returning": func(ctx context.Context, db *sql.DB, token uint64, id string) (v string, err error) {
			err = correctness.QueryRowFenced(ctx, db, sqltest.Claim, correctness.TokenArg(token), id).Scan(&v)
			return v, err
		},
		"update then select": func(ctx context.Context, db *sql.DB, token uint64, id string) (v string, err error) {
			if err := correctness.ExecFenced(ctx, db, strings.TrimSuffix(sqltest.Claim, "\nRETURNING value"), correctness.TokenArg(token), id); err != nil {
				return "", err
			}
			err = db.QueryRowContext(ctx, `SELECT value FROM protected_resource WHERE resource_id = $1`, id).Scan(&v)
			return v, err
		},
	}
	for name, claim := range claims {
		t.Run(name, func(t *testing.T) {
			sqltest.Run(t, func(t *testing.T, db *sql.DB) {
				ctx := t.Context()
				sqltest.Create(t, db, "counter")
				if err := correctness.ExecFenced(ctx, db, sqltest.Update, "41", correctness.TokenArg(10), "counter"); err != nil {
					t.Fatal(err)
				}
				const tA, tB = uint64(33), uint64(34)
				for _, tok := range []uint64{tA, tB} {
					if v, err := claim(ctx, db, tok, "counter"); err != nil || v != "41" {
						t.Fatalf("claim by %d: got %q, %v, want %q", tok, v, err, "41")
					}
				}
				if err := correctness.ExecFenced(ctx, db, sqltest.Update, "42 by A", correctness.TokenArg(tA), "counter"); !errors.Is(err, correctness.ErrStaleToken) {
					t.Fatalf("A's write after B's claim: got %v, want ErrStaleToken", err)
				}
				if _, err := claim(ctx, db, tA, "counter"); !errors.Is(err, correctness.ErrStaleToken) {
					t.Fatalf("A's claim again: got %v, want ErrStaleToken", err)
				}
				if err := correctness.ExecFenced(ctx, db, sqltest.Update, "42 by B", correctness.TokenArg(tB), "counter"); err != nil {
					t.Fatalf("B's write: %v", err)
				}
				if v, tok := sqltest.Read(t, db, "counter"); v != "42 by B" || tok != tB {
					t.Fatalf("row: got (%q, %d), want (%q, %d)", v, tok, "42 by B", tB)
				}
			})
		})
	}
}

func TestQueryRowFencedMissingRow(t *testing.T) {
	sqltest.Run(t, func(t *testing.T, db *sql.DB) {
		var v string
		err := correctness.QueryRowFenced(t.Context(), db, sqltest.Claim, correctness.TokenArg(1), "never-created").Scan(&v)
		if !errors.Is(err, correctness.ErrStaleToken) {
			t.Errorf("got %v, want ErrStaleToken", err)
		}
	})
}

func TestQueryRowFencedErrors(t *testing.T) {
	var v string
	for _, db := range []correctness.Querier{nil, (*sql.DB)(nil), (*sql.Tx)(nil), (*sql.Conn)(nil)} {
		if err := correctness.QueryRowFenced(t.Context(), db, sqltest.Claim, correctness.TokenArg(1), "r").Scan(&v); err == nil || errors.Is(err, correctness.ErrStaleToken) {
			t.Errorf("%T(nil): got %v, want an error that is not ErrStaleToken", db, err)
		}
	}
	err := correctness.QueryRowFenced(t.Context(), sqltest.SQLite(t), `UPDATE no_such_table SET fencing_token = $1 RETURNING value`, correctness.TokenArg(1)).Scan(&v)
	if err == nil || errors.Is(err, correctness.ErrStaleToken) || !strings.Contains(err.Error(), "no_such_table") {
		t.Errorf("SQL error: got %v, want the driver's error, not ErrStaleToken", err)
	}
}

// fakeExecer stands in for a driver that fails in ways SQLite does not.
type fakeExecer struct {
	res sql.Result
	err error
}

func (f fakeExecer) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return f.res, f.err
}

type rowsAffected struct {
	n   int64
	err error
}

func (r rowsAffected) LastInsertId() (int64, error) { return 0, nil }
func (r rowsAffected) RowsAffected() (int64, error) { return r.n, r.err }

func TestExecFencedErrors(t *testing.T) {
	errDriver := errors.New("driver: connection reset")
	errNoCount := errors.New("driver: RowsAffected not supported")
	tests := []struct {
		name      string
		db        correctness.Execer
		wantErr   error // matched with errors.Is; nil means any non-nil error
		wantStale bool
	}{
		{name: "nil Execer", db: nil},
		{name: "nil *sql.DB", db: (*sql.DB)(nil)},
		{name: "nil *sql.Tx", db: (*sql.Tx)(nil)},
		{name: "nil *sql.Conn", db: (*sql.Conn)(nil)},
		{name: "driver error", db: fakeExecer{err: errDriver}, wantErr: errDriver},
		{name: "no result", db: fakeExecer{}},
		{name: "rows affected unsupported", db: fakeExecer{res: rowsAffected{err: errNoCount}}, wantErr: errNoCount},
		{name: "no row affected", db: fakeExecer{res: rowsAffected{n: 0}}, wantErr: correctness.ErrStaleToken, wantStale: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := correctness.ExecFenced(t.Context(), tt.db, sqltest.Update, "v", correctness.TokenArg(1), "job")
			if err == nil {
				t.Fatalf("got nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want it to wrap %v", err, tt.wantErr)
			}
			if got := errors.Is(err, correctness.ErrStaleToken); got != tt.wantStale {
				t.Errorf("errors.Is(%v, ErrStaleToken) = %v, want %v", err, got, tt.wantStale)
			}
		})
	}
}

func TestExecFencedSQLError(t *testing.T) {
	db := sqltest.SQLite(t)
	err := correctness.ExecFenced(t.Context(), db, `UPDATE no_such_table SET fencing_token = $1`, correctness.TokenArg(1))
	if err == nil {
		t.Fatalf("got nil, want the driver's error")
	}
	if errors.Is(err, correctness.ErrStaleToken) {
		t.Errorf("got %v, want a driver error that does not match ErrStaleToken", err)
	}
}

func TestExecFencedCanceledContext(t *testing.T) {
	db := sqltest.SQLite(t)
	sqltest.Create(t, db, "job")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := correctness.ExecFenced(ctx, db, sqltest.Update, "v", correctness.TokenArg(1), "job")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if errors.Is(err, correctness.ErrStaleToken) {
		t.Errorf("got %v, want no ErrStaleToken: nothing was checked", err)
	}
}

func Example_execFenced() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // each connection would get its own in-memory database
	if _, err := db.ExecContext(ctx, sqltest.Schema); err != nil {
		fmt.Println(err)
		return
	}
	// The row exists, with token 0, before the first fenced write.
	if _, err := db.ExecContext(ctx, sqltest.CreateRow, "invoice-7"); err != nil {
		fmt.Println(err)
		return
	}

	// Holder B (token 34) writes; then holder A, paused with token 33, wakes
	// up.
	fmt.Println(correctness.ExecFenced(ctx, db, sqltest.Update, "B's total", correctness.TokenArg(34), "invoice-7"))
	err = correctness.ExecFenced(ctx, db, sqltest.Update, "A's total", correctness.TokenArg(33), "invoice-7")
	fmt.Println(errors.Is(err, correctness.ErrStaleToken))
	// Output:
	// <nil>
	// true
}

// execQuerier is what both fenced helpers can run on.
type execQuerier interface {
	correctness.Execer
	correctness.Querier
}

// countingDB counts the statements that reach it.
type countingDB struct{ calls int }

func (c *countingDB) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	c.calls++
	return rowsAffected{n: 1}, nil
}

func (c *countingDB) QueryRowContext(context.Context, string, ...any) *sql.Row {
	c.calls++
	return nil
}

// TestFencedSQLRefusesBadTokens: ExecFenced and QueryRowFenced refuse
// token 0 (which a fresh row's fencing_token 0 would let through), a token
// beyond a BIGINT, two tokens, or a token not marked as one, with an error
// matching ErrInvalidToken that names what was wrong, before the statement
// reaches the database; the row stays as it was created.
func TestFencedSQLRefusesBadTokens(t *testing.T) {
	tests := []struct {
		name string
		args []any // of sqltest.Update, whose first is the value
		want string
	}{
		{"token 0", []any{"v", correctness.TokenArg(0), "job"}, "argument 2 is token 0"},
		{"beyond a BIGINT", []any{"v", correctness.TokenArg(1 << 63), "job"}, "beyond a BIGINT"},
		{"two tokens", []any{"v", correctness.TokenArg(5), correctness.TokenArg(6)}, "two tokens, 5 and 6"},
		{"no TokenArg", []any{"v", uint64(0), "job"}, "no argument is a TokenArg"},
	}
	helpers := []struct {
		name string
		run  func(ctx context.Context, db execQuerier, args []any) error
	}{
		{"ExecFenced", func(ctx context.Context, db execQuerier, args []any) error {
			return correctness.ExecFenced(ctx, db, sqltest.Update, args...)
		}},
		{"QueryRowFenced", func(ctx context.Context, db execQuerier, args []any) error {
			var v string
			return correctness.QueryRowFenced(ctx, db, sqltest.Update+"\nRETURNING value", args...).Scan(&v)
		}},
	}
	for _, h := range helpers {
		for _, tt := range tests {
			t.Run(h.name+"/"+tt.name, func(t *testing.T) {
				db := &countingDB{}
				err := h.run(t.Context(), db, tt.args)
				if !errors.Is(err, correctness.ErrInvalidToken) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("got %v, want ErrInvalidToken saying %q", err, tt.want)
				}
				if db.calls != 0 {
					t.Errorf("got %d statements at the database, want 0", db.calls)
				}
			})
		}
	}
	sqltest.Run(t, func(t *testing.T, db *sql.DB) {
		sqltest.Create(t, db, "job")
		for _, h := range helpers {
			if err := h.run(t.Context(), db, tests[0].args); !errors.Is(err, correctness.ErrInvalidToken) {
				t.Errorf("%s with token 0 on a fresh row: got %v, want ErrInvalidToken", h.name, err)
			}
		}
		if value, token := sqltest.Read(t, db, "job"); value != "" || token != 0 {
			t.Errorf("got row (%q, %d), want (%q, 0) as created", value, token, "")
		}
	})
}

func TestTokenArgValue(t *testing.T) {
	if v, err := correctness.TokenArg(5).Value(); v != int64(5) || err != nil {
		t.Errorf("TokenArg(5): got %v, %v, want 5, nil", v, err)
	}
	if v, err := correctness.TokenArg(1 << 63).Value(); v != nil || !errors.Is(err, correctness.ErrInvalidToken) {
		t.Errorf("TokenArg(1<<63): got %v, %v, want nil, ErrInvalidToken", v, err)
	}
}
