package scripts

import (
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/luaheader"
)

// TestReplyCodesMatchTheScripts holds the codes the readers know against
// those each script's header lists (the package doc says how), so that a
// code changed in a header or in a reader alone fails it. Every script with
// codes is in the table: one a reader did not know would go unread.
func TestReplyCodesMatchTheScripts(t *testing.T) {
	attempts := []int64{int64(AttemptGranted), int64(AttemptHeld), int64(AttemptQueued), int64(AttemptWaiting), int64(AttemptSettle)}
	done := []int64{1, 0} // ReadDone
	want := map[string][]int64{
		"fenced_acquire":    {int64(AttemptGranted), int64(AttemptWaiting), int64(AttemptSettle)},
		"wait":              attempts,
		"sem_wait":          attempts,
		"sem_acquire":       {int64(AttemptGranted), int64(AttemptHeld), int64(AttemptWaiting), int64(AttemptSettle)},
		"refresh":           {leaseHeld, leaderLost, leaseGone, leaseTaken},
		"sem_refresh":       {leaseHeld, leaseGone},
		"release":           {leaseHeld, releaseHanded, leaseGone, leaseTaken, leaseBroken, releasedServeOn, goneServeOn},
		"sem_release":       {leaseHeld, releaseHanded, leaseGone, releasedServeOn},
		"pttl":              {ttlGone, ttlTaken},
		"sem_pttl":          {ttlGone},
		"election_announce": done,
		"election_proclaim": done,
		"election_resign":   done,
		"election_leader":   {int64(OfficeFree), int64(OfficeWaiting), int64(OfficeLeading)},
		"del_if_eq":         done,
		"expire_if_eq":      done,
	}
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("the scripts: got %d files, %v", len(files), err)
	}
	seen := 0
	for _, file := range files {
		script := strings.TrimSuffix(file, ".lua")
		t.Run(script, func(t *testing.T) {
			got, err := luaheader.Codes(file)
			if err != nil {
				t.Fatal(err)
			}
			codes, ok := want[script]
			if ok {
				seen++
			}
			if wantCodes := luaheader.Distinct(codes); !slices.Equal(got, wantCodes) {
				t.Errorf("reply codes: the header lists %v, the readers know %v", got, wantCodes)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("scripts found: %d of the %d with codes", seen, len(want))
	}
}

// TestScriptsNameTheirContract: every script is named after its file, and
// carries the KEYS and ARGV its header lists, KEYS[1] first.
func TestScriptsNameTheirContract(t *testing.T) {
	files, _ := filepath.Glob("*.lua")
	own := map[string]bool{}
	for _, s := range All {
		own[s.Name] = true
		if !slices.Contains(files, s.Name+".lua") {
			t.Errorf("script %q: no file %s.lua", s.Name, s.Name)
		}
		if len(s.Keys) == 0 || len(s.Args) == 0 {
			t.Errorf("script %q: %d KEYS and %d ARGV from its header, want some of each", s.Name, len(s.Keys), len(s.Args))
		}
		if len(s.Hash()) != 40 {
			t.Errorf("script %q: hash %q", s.Name, s.Hash())
		}
	}
	if len(own) != len(All) {
		t.Errorf("%d scripts, %d names", len(All), len(own))
	}
	if Release.Keys[0] != "the lock key" || !strings.HasPrefix(Release.Args[0], "the value the caller's grant stored") {
		t.Errorf("release's contract: KEYS %q, ARGV %q", Release.Keys, Release.Args)
	}
}

func TestReadAttempt(t *testing.T) {
	for _, tc := range []struct {
		reply any
		want  Attempt
		ok    bool
	}{
		{"1 o:3", Attempt{Code: AttemptGranted, Value: "o:3"}, true},
		{"1 o w:3", Attempt{Code: AttemptGranted, Value: "o w:3"}, true}, // the value is the rest
		{"2 o", Attempt{Code: AttemptHeld, Value: "o"}, true},
		{"3 250 17 42", Attempt{Code: AttemptQueued, HolderTTL: 250, Place: "17", Now: 42}, true},
		{"0 -1  ", Attempt{Code: AttemptWaiting, HolderTTL: -1}, true},
		{"4 0 17 42 9", Attempt{Code: AttemptSettle, Place: "17", Now: 42, Handed: "9"}, true},
		{"1", Attempt{}, false},
		{"1 ", Attempt{}, false},
		{"3 250 17", Attempt{}, false},
		{"3 x 17 42", Attempt{}, false},
		{"3 250 17 x", Attempt{}, false},
		{"0 250 17 42 ", Attempt{}, false},
		{"3 250 17 42 9 9", Attempt{}, false},
		{"5 250 17 42", Attempt{}, false},
		{"x o:3", Attempt{}, false},
		{"", Attempt{}, false},
		{int64(1), Attempt{}, false},
		{[]any{int64(1), "o:3"}, Attempt{}, false},
		{nil, Attempt{}, false},
	} {
		got, err := ReadAttempt(tc.reply)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ReadAttempt(%v): got %+v, %v; want %+v (ok %v)", tc.reply, got, err, tc.want, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "o:3") {
			t.Errorf("ReadAttempt(%v): the error %q shows the reply's value", tc.reply, err)
		}
	}
	fenced := map[string]Attempt{
		"granted": {Code: AttemptGranted, Value: "o:7"},
		"held":    {Code: AttemptWaiting, HolderTTL: 250},
		"lapsed":  {Code: AttemptSettle},
	}
	for name, reply := range map[string]any{
		"granted": "1 o:7",
		"held":    "0 250  ",
		"lapsed":  "4 0  ",
	} {
		if got, err := ReadAttempt(reply); err != nil || got != fenced[name] {
			t.Errorf("fenced_acquire's reply, %s: got %+v, %v", name, got, err)
		}
	}
}

func TestReadEnd(t *testing.T) {
	for _, tc := range []struct {
		reply any
		want  Ended
		ok    bool
	}{
		{"1", Ended{Lease: LeaseHeld}, true},
		{"2 -", Ended{Lease: LeaseHeld, Handed: true, Token: "-"}, true},
		{"2 9", Ended{Lease: LeaseHeld, Handed: true, Token: "9"}, true},
		{"0", Ended{Lease: LeaseGone}, true},
		{"0 9", Ended{Lease: LeaseGone, Handed: true, Token: "9"}, true},
		{"-1", Ended{Lease: LeaseTaken}, true},
		{"-3", Ended{Lease: LeaseBroken}, true},
		{"3", Ended{Lease: LeaseHeld, ServeOn: true}, true},
		{"-2", Ended{Lease: LeaseGone, ServeOn: true}, true},
		{"2", Ended{}, false},
		{"2 ", Ended{}, false},
		{"2 9 9", Ended{}, false},
		{"1 9", Ended{}, false},
		{"-1 9", Ended{}, false},
		{"4", Ended{}, false},
		{"x", Ended{}, false},
		{"", Ended{}, false},
		{int64(1), Ended{}, false},
		{[]any{int64(1), ""}, Ended{}, false},
		{nil, Ended{}, false},
	} {
		got, err := ReadEnd(tc.reply)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ReadEnd(%v): got %+v, %v; want %+v (ok %v)", tc.reply, got, err, tc.want, tc.ok)
		}
		if err == nil && got.Unheld() != (got.Lease != LeaseHeld) {
			t.Errorf("ReadEnd(%v): Unheld %v", tc.reply, got.Unheld())
		}
	}
}

func TestReadRefreshAndTTL(t *testing.T) {
	for reply, want := range map[int64]Refreshed{1: {Lease: LeaseHeld}, 2: {Lease: LeaseHeld, LeaderLost: true}, 0: {Lease: LeaseGone}, -1: {Lease: LeaseTaken}} {
		if got, err := ReadRefresh(reply); err != nil || got != want {
			t.Errorf("ReadRefresh(%d): got %+v, %v; want %+v", reply, got, err, want)
		}
	}
	for _, bad := range []any{int64(-3), int64(3), "1", nil} {
		if _, err := ReadRefresh(bad); err == nil {
			t.Errorf("ReadRefresh(%v): no error", bad)
		}
	}
	for _, tc := range []struct {
		reply int64
		ms    int64
		state LeaseState
	}{{250, 250, LeaseHeld}, {0, 0, LeaseHeld}, {-1, -1, LeaseHeld}, {-2, 0, LeaseGone}, {-3, 0, LeaseTaken}} {
		if ms, state, err := ReadTTL(tc.reply); err != nil || ms != tc.ms || state != tc.state {
			t.Errorf("ReadTTL(%d): got %d, %v, %v", tc.reply, ms, state, err)
		}
	}
	if _, _, err := ReadTTL("250"); err == nil {
		t.Error(`ReadTTL("250"): no error`)
	}
}

func TestReadInspect(t *testing.T) {
	got, err := ReadInspect([]any{int64(1), int64(-5), int64(2), "7"}, true)
	if want := (LockInfo{Held: true, TTL: -1, Waiters: 2, Token: 7}); err != nil || got != want {
		t.Errorf("fenced: got %+v, %v; want %+v", got, err, want)
	}
	if got, err := ReadInspect([]any{int64(0), int64(0), int64(0), "x"}, false); err != nil || got.Token != 0 {
		t.Errorf("an efficiency lock's counter is not read: got %+v, %v", got, err)
	}
	var bad *BadTokenError
	if _, err := ReadInspect([]any{int64(0), int64(0), int64(0), "x"}, true); !errors.As(err, &bad) || bad.Text != "x" {
		t.Errorf("a counter that holds no token: got %v", err)
	}
	if _, err := ReadInspect([]any{int64(0), int64(0), int64(0)}, true); err == nil {
		t.Error("three elements: no error")
	}
	if got, err := ReadSemInspect([]any{int64(3), int64(2), int64(1)}); err != nil || got != (SemInfo{3, 2, 1}) {
		t.Errorf("ReadSemInspect: got %+v, %v", got, err)
	}
	for _, r := range []any{[]any{int64(3), int64(2)}, []any{int64(3), "2", int64(1)}, []any{}, int64(3)} {
		if _, err := ReadSemInspect(r); err == nil {
			t.Errorf("ReadSemInspect(%v): no error", r)
		}
	}
}

func TestReadLeader(t *testing.T) {
	for _, tc := range []struct {
		reply any
		want  Sighting
		ok    bool
	}{
		{[]any{int64(0)}, Sighting{Office: OfficeFree}, true},
		{[]any{int64(1), int64(250)}, Sighting{Office: OfficeWaiting, TTL: 250}, true},
		{[]any{int64(2), int64(-1), "42", "v"}, Sighting{Office: OfficeLeading, TTL: -1, Term: 42, Value: "v"}, true},
		{[]any{int64(2), int64(250), "0", "v"}, Sighting{}, false},
		{[]any{int64(2), int64(250), "x", "v"}, Sighting{}, false},
		{[]any{int64(2), int64(250)}, Sighting{}, false},
		{[]any{int64(1)}, Sighting{}, false},
		{[]any{int64(3)}, Sighting{}, false},
		{[]any{"0"}, Sighting{}, false},
		{[]any{}, Sighting{}, false},
	} {
		got, err := ReadLeader(tc.reply, true)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ReadLeader(%v): got %+v, %v; want %+v (ok %v)", tc.reply, got, err, tc.want, tc.ok)
		}
	}
	if got, err := ReadLeader([]any{int64(2), int64(5), "42"}, false); err != nil || got.Term != 42 {
		t.Errorf("without the value: got %+v, %v", got, err)
	}
	for reply, want := range map[int64]bool{1: true, 0: false} {
		if got, err := ReadDone(reply); err != nil || got != want {
			t.Errorf("ReadDone(%d): got %v, %v", reply, got, err)
		}
	}
	if _, err := ReadDone(int64(2)); err == nil {
		t.Error("ReadDone(2): no error")
	}
}

func TestReadFence(t *testing.T) {
	var bad *BadTokenError
	for _, tc := range []struct {
		reply any
		want  Fenced
		ok    bool
	}{
		{"ok", Fenced{}, true},
		{"ok 5 v", Fenced{Writer: 5, Value: []byte("v")}, true},
		{"ok 5 v w", Fenced{Writer: 5, Value: []byte("v w")}, true},
		{"ok 5 ", Fenced{Writer: 5, Value: []byte{}}, true},
		{"ok 0", Fenced{}, true},
		{"corrupt token x y", Fenced{Refused: RefusedCorrupt, Field: "token", Text: "x y"}, true},
		{"stale 9", Fenced{Refused: RefusedStale, Bound: 9}, true},
		{"floor 9", Fenced{Refused: RefusedFloor, Bound: 9}, true},
		{"ahead 9", Fenced{Refused: RefusedAhead, Bound: 9}, true},
		{"stale", Fenced{}, false},
		{"stale 9 9", Fenced{}, false},
		{[]any{"ok"}, Fenced{}, false},
		{"what 9", Fenced{}, false},
		{int64(0), Fenced{}, false},
	} {
		got, err := ReadFence(tc.reply)
		if (err == nil) != tc.ok || got.Refused != tc.want.Refused || got.Bound != tc.want.Bound ||
			got.Writer != tc.want.Writer || string(got.Value) != string(tc.want.Value) || got.Field != tc.want.Field || got.Text != tc.want.Text {
			t.Errorf("ReadFence(%v): got %+v, %v; want %+v (ok %v)", tc.reply, got, err, tc.want, tc.ok)
		}
	}
	if _, err := ReadFence("stale x"); !errors.As(err, &bad) || bad.Text != "x" {
		t.Errorf("a bound that is no token: got %v", err)
	}
	if v, tok, err := ReadRegister([]any{"v", "3"}); err != nil || string(v) != "v" || tok != 3 {
		t.Errorf("ReadRegister: got %q, %d, %v", v, tok, err)
	}
	if v, tok, err := ReadRegister([]any{nil, nil}); err != nil || v != nil || tok != 0 {
		t.Errorf("ReadRegister of a register never written: got %q, %d, %v", v, tok, err)
	}
	if _, _, err := ReadRegister([]any{"v", "x"}); !errors.As(err, &bad) {
		t.Errorf("ReadRegister of a token that is none: got %v", err)
	}
}

func TestRefusals(t *testing.T) {
	if why, ok := BadFence("BADFENCE the counter holds x"); !ok || why != "the counter holds x" {
		t.Errorf("BadFence: got %q, %v", why, ok)
	}
	if n, ok := OtherLimit("LIMIT 3"); !ok || n != "3" {
		t.Errorf("OtherLimit: got %q, %v", n, ok)
	}
	if _, ok := OtherLimit("BADFENCE x"); ok {
		t.Error("OtherLimit of a BADFENCE: ok")
	}
}

// TestScriptsDefineWhatTheyCall: each script's source defines every shared
// function it calls before it calls it, and no function it never calls
// (each costs every call a closure, docs/protocol.md "Cost"); its code says
// no LINGER but the number.
func TestScriptsDefineWhatTheyCall(t *testing.T) {
	shared := map[string]bool{}
	for _, lib := range []string{prelude, grantSrc, queueSrc, semaphoreSrc, leaseSrc, registerFenceSrc} {
		for _, m := range definition.FindAllStringSubmatch(lib, -1) {
			shared[m[1]] = true
		}
	}
	if len(shared) < 15 {
		t.Fatalf("shared functions: got %d, want the files' 15 or more", len(shared))
	}
	defines := regexp.MustCompile(`(?m)^local function (\w+)\(`)
	calls := regexp.MustCompile(`([A-Za-z_.:]\w*)\s*\(`)
	for _, s := range All {
		code := comment.ReplaceAllString(s.Source, "")
		defined := map[string]int{} // where
		for _, m := range defines.FindAllStringSubmatchIndex(code, -1) {
			name := code[m[2]:m[3]]
			defined[name] = m[0]
			uses := regexp.MustCompile(`\b`+name+`\b`).FindAllStringIndex(code, -1)
			if len(uses) < 2 {
				t.Errorf("%s defines %s and never calls it", s.Name, name)
			}
		}
		for _, m := range calls.FindAllStringSubmatchIndex(code, -1) {
			name := code[m[2]:m[3]]
			if at, ok := defined[name]; shared[name] && (!ok || at > m[0]) {
				t.Errorf("%s calls %s before defining it", s.Name, name)
			}
		}
		if strings.Contains(code, "LINGER") {
			t.Errorf("%s: its code says LINGER, not %d", s.Name, LingerMillis)
		}
	}
	if !strings.Contains(Release.Source, "'PX', "+strconv.Itoa(LingerMillis)+")") {
		t.Errorf("release's source does not set the vacant value for Linger ms")
	}
}
