package rmw_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/leasekit/leasekit/correctness"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"
)

// workerEnv carries a workerConfig, as JSON, to a re-executed test binary
// that plays a worker.
const workerEnv = "LEASEKIT_RMW_WORKER"

// workerConfig is what a worker process needs.
type workerConfig struct {
	Fence  string // register, sqlite, postgres or proxy
	Claim  bool   // read by claiming, or with a plain read
	Redis  string // the lock server's address
	Lock   string // the lock's name, and the Register's resource
	DSN    string // sqlite, postgres: the database
	Proxy  string // proxy: the counter's URL through the FencingProxy
	Direct string // proxy: the counter's URL on the backend, around the proxy
	Rounds int
	TTL    time.Duration
}

// The table and statements of the SQL counters.
const (
	sqlSchema = `CREATE TABLE counter (
    id            TEXT PRIMARY KEY,
    value         BIGINT NOT NULL,
    fencing_token BIGINT NOT NULL DEFAULT 0
)`
	sqlCreate = `INSERT INTO counter (id, value) VALUES ('c', 0)`
	sqlClaim  = `UPDATE counter SET fencing_token = $1 WHERE id = 'c' AND fencing_token <= $1 RETURNING value`
	sqlRead   = `SELECT value FROM counter WHERE id = 'c'`
	sqlWrite  = `UPDATE counter SET value = $1, fencing_token = $2 WHERE id = 'c' AND fencing_token <= $2`
)

// counter is the protected counter as a worker reaches it through a fence.
type counter interface {
	// read claims the counter with token and returns its value, or reads it
	// plainly without a claim.
	read(ctx context.Context, token uint64) (int64, error)
	// write stores v with token; an error matching ErrStaleToken is a refusal.
	write(ctx context.Context, token uint64, v int64) error
}

// work is a worker process: cfg.Rounds times, it acquires the lock, reads
// the counter and reports "R token value", waits for a line on stdin, writes
// value+1 and reports "A token value" when the write was accepted, "S token"
// when the fence refused it ("C token" when it refused the claim), and
// releases. It ends with "D"; a failure is "E message" and exit status 1.
func work(env string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(env), &cfg); err != nil {
		fmt.Println("E config:", err)
		return 1
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer client.Close()
	c, err := newCounter(cfg, client)
	if err != nil {
		fmt.Println("E", err)
		return 1
	}
	locker := correctness.New(client, correctness.WithAudit(false))
	defer locker.Close()
	in := bufio.NewReader(os.Stdin)
	for range cfg.Rounds {
		if err := round(ctx, cfg, locker, c, in); err != nil {
			fmt.Println("E", strings.ReplaceAll(err.Error(), "\n", " "))
			return 1
		}
	}
	fmt.Println("D")
	return 0
}

func round(ctx context.Context, cfg workerConfig, locker *correctness.Locker, c counter, in *bufio.Reader) error {
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	lease, err := locker.Acquire(actx, cfg.Lock, cfg.TTL)
	cancel()
	if errors.Is(err, correctness.ErrLateGrant) {
		return nil // a grant after its deadline on a stopped or busy machine: nobody holds it
	}
	if err != nil {
		return err
	}
	defer func() { _ = lease.Release(ctx) }() // a superseded holder's release fails, harmlessly
	token := lease.Token()
	v, err := c.read(ctx, token)
	if errors.Is(err, correctness.ErrStaleToken) {
		fmt.Println("C", token)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	fmt.Println("R", token, v)
	if _, err := in.ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the go-ahead: %w", err)
	}
	switch err := c.write(ctx, token, v+1); {
	case errors.Is(err, correctness.ErrStaleToken):
		fmt.Println("S", token)
	case err != nil:
		return fmt.Errorf("write: %w", err)
	default:
		fmt.Println("A", token, v+1)
	}
	return nil
}

func newCounter(cfg workerConfig, client *redis.Client) (counter, error) {
	switch cfg.Fence {
	case "register":
		return registerCounter{reg: correctness.NewRegister(client), name: cfg.Lock, claim: cfg.Claim}, nil
	case "sqlite", "postgres":
		driver := map[string]string{"sqlite": "sqlite", "postgres": "pgx"}[cfg.Fence]
		db, err := sql.Open(driver, cfg.DSN)
		return sqlCounter{db: db, claim: cfg.Claim}, err
	case "proxy":
		return proxyCounter{cfg: cfg, client: &http.Client{Timeout: time.Minute}}, nil
	}
	return nil, fmt.Errorf("no fence %q", cfg.Fence)
}

type registerCounter struct {
	reg   *correctness.Register
	name  string
	claim bool
}

func (c registerCounter) read(ctx context.Context, token uint64) (int64, error) {
	var v []byte
	var err error
	if c.claim {
		v, _, err = c.reg.Claim(ctx, c.name, token)
	} else {
		v, _, err = c.reg.Read(ctx, c.name)
	}
	if err != nil || v == nil {
		return 0, err
	}
	return strconv.ParseInt(string(v), 10, 64)
}

func (c registerCounter) write(ctx context.Context, token uint64, v int64) error {
	return c.reg.Write(ctx, c.name, token, []byte(strconv.FormatInt(v, 10)))
}

type sqlCounter struct {
	db    *sql.DB
	claim bool
}

func (c sqlCounter) read(ctx context.Context, token uint64) (v int64, err error) {
	if c.claim {
		err = correctness.QueryRowFenced(ctx, c.db, sqlClaim, correctness.TokenArg(token)).Scan(&v)
	} else {
		err = c.db.QueryRowContext(ctx, sqlRead).Scan(&v)
	}
	return v, err
}

func (c sqlCounter) write(ctx context.Context, token uint64, v int64) error {
	return correctness.ExecFenced(ctx, c.db, sqlWrite, v, correctness.TokenArg(token))
}

type proxyCounter struct {
	cfg    workerConfig
	client *http.Client
}

func (c proxyCounter) read(ctx context.Context, token uint64) (int64, error) {
	if !c.cfg.Claim {
		body, err := c.do(ctx, http.MethodGet, c.cfg.Direct, 0, "")
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(body, 10, 64)
	}
	body, err := c.do(ctx, http.MethodGet, c.cfg.Proxy, token, "")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(body, 10, 64)
}

func (c proxyCounter) write(ctx context.Context, token uint64, v int64) error {
	_, err := c.do(ctx, http.MethodPut, c.cfg.Proxy, token, strconv.FormatInt(v, 10))
	return err
}

// do sends a request, with token as its Fencing-Token unless 0, and returns
// the body of a 200; a 409 is ErrStaleToken.
func (c proxyCounter) do(ctx context.Context, method, url string, token uint64, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	if token != 0 {
		req.Header.Set(correctness.TokenHeader, strconv.FormatUint(token, 10))
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return "", err
	case resp.StatusCode == http.StatusConflict:
		return "", fmt.Errorf("%w: %s", correctness.ErrStaleToken, b)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%s %s: status %d: %s", method, url, resp.StatusCode, b)
	}
	return string(b), nil
}
