package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/leasetest"
	"github.com/redis/go-redis/v9"
)

// The paused-holder scenario of Kleppmann's analysis, with the real API on
// miniredis, time moved by leasetest's Advance: client A takes token 33, pauses past
// its lease, client B takes token 34 and writes, and A wakes up and writes too.
// Without a fence A's write destroys B's; with the Register it is rejected.
// The output is that of the seed document's fencing.py, line for line.
func Example_pausedHolder() {
	for i, fenced := range []bool{false, true} {
		if i > 0 {
			fmt.Println()
		}
		if fenced {
			fmt.Println("storage WITH fencing")
		} else {
			fmt.Println("storage WITHOUT fencing")
		}
		for _, line := range pausedHolder(fenced) {
			fmt.Println("  " + line)
		}
	}
	// Output:
	// storage WITHOUT fencing
	//   t= 0  A       acquires lease, token 33, expires t=10
	//   t= 1  A       reads ['v0']
	//   t= 2  A       checks lease: 8s left, safe to write
	//   t= 2  A       stop-the-world GC pause begins
	//   t= 5  C       tries to acquire: refused, lease still live
	//   t=10  lock    lease A expires; A does not know
	//   t=11  B       acquires lease, token 34, expires t=21
	//   t=12  B       reads ['v0']
	//   t=13  B       writes -> accepted, data=['v0', 'B']
	//   t=15  A       pause ends; A still believes it holds the lock
	//   t=15  A       writes -> accepted, data=['v0', 'A']
	//   t=16  result  data=['v0', 'A']  B's update is LOST
	//
	// storage WITH fencing
	//   t= 0  A       acquires lease, token 33, expires t=10
	//   t= 1  A       reads ['v0']
	//   t= 2  A       checks lease: 8s left, safe to write
	//   t= 2  A       stop-the-world GC pause begins
	//   t= 5  C       tries to acquire: refused, lease still live
	//   t=10  lock    lease A expires; A does not know
	//   t=11  B       acquires lease, token 34, expires t=21
	//   t=12  B       reads ['v0']
	//   t=13  B       writes -> accepted, data=['v0', 'B']
	//   t=15  A       pause ends; A still believes it holds the lock
	//   t=15  A       writes -> REJECTED (token 33 < 34)
	//   t=16  result  data=['v0', 'B']  B's update survives
}

// storage is the protected resource: a list of strings, kept either in a
// plain Redis key (no fence) or in a fenced Register.
type storage struct {
	client *redis.Client
	reg    *correctness.Register // nil: unfenced
}

func (s storage) read(ctx context.Context) []string {
	var raw string
	if s.reg != nil {
		v, _, _ := s.reg.Read(ctx, "data")
		raw = string(v)
	} else {
		raw = s.client.Get(ctx, "data").Val()
	}
	if raw == "" {
		return []string{"v0"}
	}
	return strings.Split(raw, ",")
}

func (s storage) write(ctx context.Context, data []string, token uint64) string {
	value := strings.Join(data, ",")
	if s.reg != nil {
		err := s.reg.Write(ctx, "data", token, []byte(value))
		var stale *correctness.StaleTokenError
		if errors.As(err, &stale) {
			return fmt.Sprintf("REJECTED (token %d < %d)", stale.Token, stale.Highest)
		}
	} else {
		s.client.Set(ctx, "data", value, 0)
	}
	return "accepted, data=" + pyList(data)
}

func pyList(data []string) string {
	return "['" + strings.Join(data, "', '") + "']"
}

func pausedHolder(fenced bool) []string {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	client := env.Client
	ctx := context.Background()

	// Small sequential tokens, as in the story: no clock floor, and a
	// counter that has granted 32 leases already.
	locker := correctness.New(client, correctness.WithClockFloor(false), correctness.WithAudit(false))
	defer locker.Close()
	client.Set(ctx, "leasekit:{storage}:fence", 32, 0)
	store := storage{client: client}
	if fenced {
		store.reg = correctness.NewRegister(client)
	}

	var log []string
	now := 0
	at := func(t int) { env.Advance(time.Duration(t-now) * time.Second); now = t }
	say := func(who, what string) { log = append(log, fmt.Sprintf("t=%2d  %-7s %s", now, who, what)) }
	expiry := func(l *correctness.Lease) int {
		ttl, _ := l.TTL(ctx)
		return now + int(ttl/time.Second)
	}
	const ttl = 10 * time.Second

	a, _ := locker.TryAcquire(ctx, "storage", ttl)
	say("A", fmt.Sprintf("acquires lease, token %d, expires t=%d", a.Token(), expiry(a)))
	at(1)
	snapA := store.read(ctx)
	say("A", "reads "+pyList(snapA))
	at(2)
	left, _ := a.TTL(ctx)
	say("A", fmt.Sprintf("checks lease: %ds left, safe to write", left/time.Second))
	say("A", "stop-the-world GC pause begins")

	at(5)
	if _, err := locker.TryAcquire(ctx, "storage", ttl); errors.Is(err, correctness.ErrNotObtained) {
		say("C", "tries to acquire: refused, lease still live")
	} else {
		say("C", "tries to acquire: granted")
	}
	at(10)
	if _, err := a.TTL(ctx); errors.Is(err, correctness.ErrNotHeld) {
		say("lock", "lease A expires; A does not know")
	}
	at(11)
	b, _ := locker.TryAcquire(ctx, "storage", ttl)
	say("B", fmt.Sprintf("acquires lease, token %d, expires t=%d", b.Token(), expiry(b)))
	at(12)
	snapB := store.read(ctx)
	say("B", "reads "+pyList(snapB))
	at(13)
	say("B", "writes -> "+store.write(ctx, append(snapB, "B"), b.Token()))

	at(15)
	say("A", "pause ends; A still believes it holds the lock")
	say("A", "writes -> "+store.write(ctx, append(snapA, "A"), a.Token()))
	at(16)
	data := store.read(ctx)
	if len(data) == 2 && data[1] == "B" {
		say("result", "data="+pyList(data)+"  B's update survives")
	} else {
		say("result", "data="+pyList(data)+"  B's update is LOST")
	}
	return log
}

func ExampleLocker_TryAcquire() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	locker := correctness.New(env.Client, correctness.WithAudit(false))
	defer locker.Close()
	reg := correctness.NewRegister(env.Client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the work's own deadline
	defer cancel()

	lease, err := locker.TryAcquire(ctx, "account-42", 10*time.Second)
	if errors.Is(err, correctness.ErrNotObtained) {
		fmt.Println("another worker holds it")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	// Release on a short context of its own: by the time this runs, ctx may
	// have ended, and a Release that cannot reach Redis leaves the lock held
	// for its whole ttl.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := lease.Release(ctx); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("released")
	}()

	// Every write carries the token; the register rejects an older one.
	if err := reg.Write(ctx, "account-42", lease.Token(), []byte("balance=10")); err != nil {
		fmt.Println(err)
		return
	}
	value, token, _ := reg.Read(ctx, "account-42")
	fmt.Println(string(value), token == lease.Token())
	// Output:
	// balance=10 true
	// released
}
