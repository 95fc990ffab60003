package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/leasetest"
	"github.com/redis/go-redis/v9"
)

// The paused-holder scenario of Kleppmann's analysis, with the real API on
// miniredis, time moved by leasetest's Advance: client A takes token 33, pauses
// past its lease, client B takes token 34 and writes, and A wakes up and writes
// too. Without a fence A's write destroys B's; with the Register it is
// rejected. The output is that of the seed document's fencing.py, line for
// line.
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

// The read-modify-write story, where A comes first: A (token 33) reads the
// counter and pauses past its lease; B (token 34) reads the same value; A
// wakes up and writes, then B. With Read, no newer token has written when A
// writes, so both writes are accepted and one acknowledged increment is
// lost. With Claim, B's read raises the fence, so A's write is refused.
func Example_readModifyWrite() {
	for i, claim := range []bool{false, true} {
		if i > 0 {
			fmt.Println()
		}
		if claim {
			fmt.Println("reads with Claim")
		} else {
			fmt.Println("reads with Read")
		}
		for _, line := range readModifyWrite(claim) {
			fmt.Println("  " + line)
		}
	}
	// Output:
	// reads with Read
	//   t= 0  A       acquires lease, token 33, expires t=10
	//   t= 1  A       reads counter=41
	//   t= 1  A       stop-the-world GC pause begins
	//   t=11  B       acquires lease, token 34, expires t=21
	//   t=12  B       reads counter=41
	//   t=15  A       pause ends; writes 42 -> accepted
	//   t=16  B       writes 42 -> accepted
	//   t=17  result  counter=42 after 2 acknowledged increments: 1 LOST
	//
	// reads with Claim
	//   t= 0  A       acquires lease, token 33, expires t=10
	//   t= 1  A       claims, reads counter=41
	//   t= 1  A       stop-the-world GC pause begins
	//   t=11  B       acquires lease, token 34, expires t=21
	//   t=12  B       claims, reads counter=41
	//   t=15  A       pause ends; writes 42 -> REJECTED (token 33 < 34)
	//   t=16  B       writes 42 -> accepted
	//   t=17  result  counter=42 after 1 acknowledged increment: none lost
}

// readModifyWrite plays Example_readModifyWrite's story, reading with Claim
// or with Read, and returns its timeline.
func readModifyWrite(claim bool) []string {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()
	locker := correctness.New(env.Client, correctness.WithClockFloor(false), correctness.WithAudit(false))
	defer locker.Close()
	env.Client.Set(ctx, "leasekit:{counter}:fence", 32, 0)
	reg := correctness.NewRegister(env.Client)
	_ = reg.Write(ctx, "counter", 1, []byte("41"))

	tl := &timeline{env: env}
	read := func(who string, l *correctness.Lease) int {
		verb, v := "reads", []byte(nil)
		if claim {
			verb = "claims, reads"
			v, _, _ = reg.Claim(ctx, "counter", l.Token())
		} else {
			v, _, _ = reg.Read(ctx, "counter")
		}
		n, _ := strconv.Atoi(string(v))
		tl.say(who, fmt.Sprintf("%s counter=%d", verb, n))
		return n
	}
	acked := 0
	write := func(l *correctness.Lease, n int) string {
		err := reg.Write(ctx, "counter", l.Token(), []byte(strconv.Itoa(n)))
		var stale *correctness.StaleTokenError
		if errors.As(err, &stale) {
			return fmt.Sprintf("writes %d -> REJECTED (token %d < %d)", n, stale.Token, stale.Highest)
		}
		acked++
		return fmt.Sprintf("writes %d -> accepted", n)
	}
	const ttl = 10 * time.Second

	acquire := func(who string) *correctness.Lease {
		l, _ := locker.TryAcquire(ctx, "counter", ttl)
		left, _ := l.TTL(ctx)
		tl.say(who, fmt.Sprintf("acquires lease, token %d, expires t=%d", l.Token(), tl.now+int(left/time.Second)))
		return l
	}
	a := acquire("A")
	tl.at(1)
	nA := read("A", a)
	tl.say("A", "stop-the-world GC pause begins")
	tl.at(11)
	b := acquire("B")
	tl.at(12)
	nB := read("B", b)
	tl.at(15)
	tl.say("A", "pause ends; "+write(a, nA+1))
	tl.at(16)
	tl.say("B", write(b, nB+1))
	tl.at(17)
	v, _, _ := reg.Read(ctx, "counter")
	final, _ := strconv.Atoi(string(v))
	lost := fmt.Sprintf("%d LOST", acked-(final-41))
	if acked == final-41 {
		lost = "none lost"
	}
	plural := "s"
	if acked == 1 {
		plural = ""
	}
	tl.say("result", fmt.Sprintf("counter=%d after %d acknowledged increment%s: %s", final, acked, plural, lost))
	return tl.lines
}

// timeline is a story's log, on leasetest's clock counted in seconds.
type timeline struct {
	env   *leasetest.Env
	now   int
	lines []string
}

func (tl *timeline) at(t int) {
	tl.env.Advance(time.Duration(t-tl.now) * time.Second)
	tl.now = t
}

func (tl *timeline) say(who, what string) {
	tl.lines = append(tl.lines, fmt.Sprintf("t=%2d  %-7s %s", tl.now, who, what))
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

// A holder that reads, computes and writes back: the README's snippet.
func ExampleRegister_Claim() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()
	locker := correctness.New(env.Client, correctness.WithAudit(false))
	defer locker.Close()
	reg := correctness.NewRegister(env.Client)

	deposit := func(amount int) error {
		return locker.Do(ctx, "account-42", 10*time.Second, func(ctx context.Context, token uint64) error {
			// Claim, not Read: from here on an older holder's write is
			// refused, even before this holder writes.
			old, _, err := reg.Claim(ctx, "account-42", token)
			if err != nil {
				return err // ErrStaleToken: a newer holder has claimed the account
			}
			balance, _ := strconv.Atoi(string(old))
			// Fails with ErrStaleToken if a newer holder has claimed the
			// account since: this holder's lease was lost while it worked.
			return reg.Write(ctx, "account-42", token, []byte(strconv.Itoa(balance+amount)))
		})
	}
	fmt.Println(deposit(10), deposit(5))
	balance, _, _ := reg.Read(ctx, "account-42")
	fmt.Println(string(balance))
	// Output:
	// <nil> <nil>
	// 15
}
