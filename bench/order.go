package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Arrival order, as the server saw it (bench/README.md has the method): in
// an ordering run, each worker's client hooks record the first command of
// every contender's acquisition, and a MONITOR connection on every node gives
// the order in which the nodes ran them. Grants are ordered by the
// contenders' own stamps: the lock is held by one at a time, so each grant's
// stamp comes after the previous holder's release, and that release after
// its holder's stamp.

// firstCommandKey carries a contender's *firstCommand in the context of its
// acquisition.
type firstCommandKey struct{}

// firstCommand is the first command a contender's acquisition sent, as the
// arguments the server received.
type firstCommand struct {
	mu   sync.Mutex
	args []string
}

func (f *firstCommand) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.args
}

// withFirstCommand returns ctx carrying a new firstCommand that the clients'
// hooks fill in.
func withFirstCommand(ctx context.Context) (context.Context, *firstCommand) {
	f := &firstCommand{}
	return context.WithValue(ctx, firstCommandKey{}, f), f
}

// noteFirst records the command that args gives as the first of ctx's
// acquisition, unless ctx is no contender's or it has one already.
func noteFirst(ctx context.Context, args func() []string) {
	f, ok := ctx.Value(firstCommandKey{}).(*firstCommand)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.args == nil {
		f.args = args()
	}
}

// goRedisArgs are a go-redis command's arguments as the client writes them.
func goRedisArgs(cmd redis.Cmder) []string {
	args := cmd.Args()
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
		case string:
			out[i] = v
		case []byte:
			out[i] = string(v)
		case int:
			out[i] = strconv.Itoa(v)
		case int64:
			out[i] = strconv.FormatInt(v, 10)
		case int32:
			out[i] = strconv.FormatInt(int64(v), 10)
		case uint64:
			out[i] = strconv.FormatUint(v, 10)
		case uint32:
			out[i] = strconv.FormatUint(uint64(v), 10)
		case uint:
			out[i] = strconv.FormatUint(uint64(v), 10)
		case float64:
			out[i] = strconv.FormatFloat(v, 'f', -1, 64)
		case bool:
			out[i] = map[bool]string{true: "1", false: "0"}[v]
		case time.Duration:
			out[i] = strconv.FormatInt(v.Nanoseconds(), 10)
		default:
			out[i] = fmt.Sprint(v) // no command of the libraries sends one
		}
	}
	return out
}

// monitor is a MONITOR connection to one node: the commands that clients
// sent it, in the order it ran them.
type monitor struct {
	conn net.Conn
	more chan struct{} // a line came
	done chan struct{} // the connection closed
	mu   sync.Mutex
	got  []string
}

// startMonitor opens a MONITOR connection to the node that opts reaches.
func startMonitor(ctx context.Context, opts *redis.Options) (*monitor, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("MONITOR on %s: %w", opts.Addr, err)
	}
	if opts.TLSConfig != nil {
		tc := tls.Client(conn, opts.TLSConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("MONITOR on %s: %w", opts.Addr, err)
		}
		conn = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	rd := bufio.NewReader(conn)
	var cmds [][]string
	switch {
	case opts.Password != "" && opts.Username != "":
		cmds = append(cmds, []string{"AUTH", opts.Username, opts.Password})
	case opts.Password != "":
		cmds = append(cmds, []string{"AUTH", opts.Password})
	}
	cmds = append(cmds, []string{"MONITOR"})
	for _, c := range cmds {
		err := writeCommand(conn, c)
		var line string
		if err == nil {
			line, err = rd.ReadString('\n')
		}
		if err == nil && !strings.HasPrefix(line, "+") {
			err = fmt.Errorf("%s: %s", c[0], strings.TrimSpace(line))
		}
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("MONITOR on %s: %w", opts.Addr, err)
		}
	}
	_ = conn.SetDeadline(time.Time{})
	m := &monitor{conn: conn, more: make(chan struct{}, 1), done: make(chan struct{})}
	go m.read(rd)
	return m, nil
}

// writeCommand writes args as a RESP command.
func writeCommand(conn net.Conn, args []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := conn.Write([]byte(b.String()))
	return err
}

// read collects the stream until the connection closes.
func (m *monitor) read(rd *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		m.mu.Lock()
		m.got = append(m.got, strings.TrimSuffix(strings.TrimPrefix(line, "+"), "\r\n"))
		m.mu.Unlock()
		select {
		case m.more <- struct{}{}:
		default:
		}
	}
}

// stop waits until the stream has reached marker (the argument of a command
// sent after every command the caller wants), or 5 s have passed, and closes
// the connection. It returns the commands that clients sent, scripts' aside.
func (m *monitor) stop(marker string) ([]monitored, error) {
	limit := time.After(5 * time.Second)
	reached := false
wait:
	for scanned := 0; ; {
		m.mu.Lock()
		for ; scanned < len(m.got) && !reached; scanned++ {
			reached = strings.Contains(m.got[scanned], marker)
		}
		m.mu.Unlock()
		if reached {
			break
		}
		select {
		case <-m.more:
		case <-limit:
			break wait
		case <-m.done:
			break wait
		}
	}
	_ = m.conn.Close()
	<-m.done
	var out []monitored
	for _, line := range m.got {
		if c, ok := parseMonitorLine(line); ok && c.client != "lua" {
			out = append(out, c)
		}
	}
	if !reached {
		return out, errors.New("the MONITOR stream did not reach its end within 5 s")
	}
	return out, nil
}

// monitored is one command of a MONITOR stream.
type monitored struct {
	client string // "host:port", or "lua" for a command a script ran
	args   []string
}

// parseMonitorLine reads a line such as
// `1796140510.325479 [0 127.0.0.1:49620] "evalsha" "9ae0..." "1" "k" "v\x01"`.
func parseMonitorLine(line string) (monitored, bool) {
	_, rest, ok := strings.Cut(line, " [")
	if !ok {
		return monitored{}, false
	}
	header, quoted, ok := strings.Cut(rest, "] ")
	if !ok {
		return monitored{}, false
	}
	_, client, _ := strings.Cut(header, " ")
	args, ok := unquoteArgs(quoted)
	return monitored{client: client, args: args}, ok
}

// unquoteArgs reads the quoted, space-separated arguments of a MONITOR line,
// escaped as the server's sdscatrepr writes them.
func unquoteArgs(s string) ([]string, bool) {
	var args []string
	for s = strings.TrimLeft(s, " "); s != ""; s = strings.TrimLeft(s, " ") {
		if s[0] != '"' {
			return nil, false
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' || i+1 >= len(s) {
				b.WriteByte(s[i])
				continue
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return nil, false
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return nil, false
				}
				b.WriteByte(byte(v))
				i += 2
			default: // \\ and \"
				b.WriteByte(s[i])
			}
		}
		if i >= len(s) {
			return nil, false
		}
		args = append(args, b.String())
		s = s[i+1:]
	}
	return args, true
}

// commandKey identifies a command by its arguments, the name in any case.
func commandKey(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return strings.ToLower(args[0]) + "\x00" + strings.Join(args[1:], "\x00")
}

// ordering is one ordering convoy's view of the server: the monitors of its
// nodes and, for a library that queues its waiters, the queue as read before
// the release.
type ordering struct {
	monitors []*monitor
	queue    []string // the owner ids of the queue's entries, first in line first
}

// startOrdering opens a MONITOR connection to every node of t.
func startOrdering(ctx context.Context, t *target) (*ordering, error) {
	var mu sync.Mutex
	o := &ordering{}
	err := t.nodes(ctx, func(ctx context.Context, node *redis.Client) error {
		m, err := startMonitor(ctx, node.Options())
		if err != nil {
			return err
		}
		mu.Lock()
		o.monitors = append(o.monitors, m)
		mu.Unlock()
		return nil
	})
	if err != nil {
		o.close()
		return nil, err
	}
	return o, nil
}

func (o *ordering) close() {
	for _, m := range o.monitors {
		_ = m.conn.Close()
		<-m.done
	}
}

// arrivals stops the monitors and returns, for each command key, its
// arrival: the node's index among the monitors, and its place in that
// node's stream (the first time the node ran it).
func (o *ordering) arrivals(ctx context.Context, t *target, id string) (map[string]arrival, error) {
	marker := "bench:" + id + ":monitor-end"
	_ = t.nodes(ctx, func(ctx context.Context, node *redis.Client) error {
		return node.Echo(ctx, marker).Err()
	})
	out := make(map[string]arrival)
	var errs []error
	for i, m := range o.monitors {
		cmds, err := m.stop(marker)
		errs = append(errs, err)
		for place, c := range cmds {
			k := commandKey(c.args)
			if _, seen := out[k]; !seen {
				out[k] = arrival{node: i, place: place}
			}
		}
	}
	return out, errors.Join(errs...)
}

// arrival is where a command stands in the servers' order.
type arrival struct{ node, place int }

// readQueue waits until the wait queue at key holds n entries (or 5 s have
// passed) and returns the owner ids of its entries, first in line first. An
// entry starts with its owner id (scripts/wire.go).
func readQueue(ctx context.Context, client redis.UniversalClient, key string, n int) ([]string, error) {
	var entries []string
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		entries, err = client.ZRange(ctx, key, 0, -1).Result()
		if err != nil || len(entries) >= n || time.Now().After(deadline) {
			break
		}
	}
	owners := make([]string, len(entries))
	for i, e := range entries {
		owners[i] = scripts.EntryOwner(e)
	}
	return owners, err
}

// arrivalRanks returns each contender's rank by the server's arrival of its
// first command, or -1 where it is unknown.
func arrivalRanks(cs []procContender, arrivals map[string]arrival) []int {
	ranks := make([]int, len(cs))
	nodes := make(map[int]bool)
	for i, c := range cs {
		a, ok := arrivals[commandKey(c.first())]
		if !ok || len(c.First) == 0 {
			ranks[i] = -1
			continue
		}
		ranks[i] = a.place
		nodes[a.node] = true
	}
	if len(nodes) > 1 { // places on different nodes do not compare
		for i := range ranks {
			ranks[i] = -1
		}
	}
	return ranks
}

// queueRanks returns each contender's place in queue, the owner ids of the
// queue's entries, or -1 where it is not there. A contender's owner id is an
// argument of its first command.
func queueRanks(cs []procContender, queue []string) []int {
	ranks := make([]int, len(cs))
	for i, c := range cs {
		ranks[i] = -1
		for place, owner := range queue {
			if owner != "" && slices.Contains(c.first(), owner) {
				ranks[i] = place
				break
			}
		}
	}
	return ranks
}

// first is the contender's first command, as strings.
func (c procContender) first() []string {
	out := make([]string, len(c.First))
	for i, a := range c.First {
		out[i] = string(a)
	}
	return out
}

// outOfOrder counts the grants, in grant order, made while a contender that
// ranks ahead (lower) was still waiting; it counts only contenders with a
// known rank, and returns how many those were.
func outOfOrder(byGrant []int) (out, known int) {
	for i, r := range byGrant {
		if r < 0 {
			continue
		}
		known++
		for _, later := range byGrant[i+1:] {
			if later >= 0 && later < r {
				out++
				break
			}
		}
	}
	return out, known
}
