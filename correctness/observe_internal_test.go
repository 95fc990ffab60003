package correctness

import (
	"testing"
	"time"
)

func TestParseNotice(t *testing.T) {
	cases := []struct {
		msg  string
		want notice
		ok   bool
	}{
		{"elected 17 900 host a:1", notice{leader: Leader{Value: []byte("host a:1"), Term: 17}, ttl: 900 * time.Millisecond}, true},
		{"elected 17 -1 ", notice{leader: Leader{Value: []byte{}, Term: 17}, ttl: -time.Millisecond}, true},
		{"elected 1795974129470711 5 \x00 \n", notice{leader: Leader{Value: []byte("\x00 \n"), Term: 1795974129470711}, ttl: 5 * time.Millisecond}, true},
		{"vacant 18", notice{vacant: true, leader: Leader{Term: 18}}, true},
		{"vacant 0", notice{}, false},
		{"vacant x", notice{}, false},
		{"elected 17 900", notice{}, false},
		{"elected 0 900 v", notice{}, false},
		{"elected 17 x v", notice{}, false},
		{"resigned 17", notice{}, false},
		{"", notice{}, false},
	}
	for _, tc := range cases {
		got, ok := parseNotice(tc.msg)
		if ok != tc.ok || ok && (got.vacant != tc.want.vacant || got.leader.Term != tc.want.leader.Term ||
			string(got.leader.Value) != string(tc.want.leader.Value) || got.ttl != tc.want.ttl) {
			t.Errorf("parseNotice(%q): got %+v, %v, want %+v, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseSighting(t *testing.T) {
	cases := []struct {
		reply []any
		want  sighting
		ok    bool
	}{
		{[]any{int64(0)}, sighting{state: free}, true},
		{[]any{int64(1), int64(250)}, sighting{state: waiting, ttl: 250 * time.Millisecond}, true},
		{[]any{int64(2), int64(-1), "42", "v"}, sighting{state: leading, ttl: -time.Millisecond, leader: Leader{Value: []byte("v"), Term: 42}}, true},
		{[]any{int64(2), int64(250), "0", "v"}, sighting{}, false},
		{[]any{int64(2), int64(250), "x", "v"}, sighting{}, false},
		{[]any{int64(2), int64(250)}, sighting{}, false},
		{[]any{int64(1)}, sighting{}, false},
		{[]any{int64(3)}, sighting{}, false},
		{[]any{"0"}, sighting{}, false},
		{[]any{}, sighting{}, false},
	}
	for _, tc := range cases {
		got, err := parseSighting(tc.reply)
		if (err == nil) != tc.ok || tc.ok && (got.state != tc.want.state || got.ttl != tc.want.ttl ||
			got.leader.Term != tc.want.leader.Term || string(got.leader.Value) != string(tc.want.leader.Value)) {
			t.Errorf("parseSighting(%v): got %+v, %v, want %+v (ok %v)", tc.reply, got, err, tc.want, tc.ok)
		}
	}
}

// TestToldKeepsTermOrder: whatever order announcements, vacancies and reads
// come in, an observer sends leaders in rising term order, none only after a
// leader, and nothing twice.
func TestToldKeepsTermOrder(t *testing.T) {
	a, b := Leader{Value: []byte("a"), Term: 5}, Leader{Value: []byte("b"), Term: 9}
	type step struct {
		what string // "elected", "vacant" (with term), "gone" (a read found none)
		x    Leader
		term uint64
		send bool
	}
	steps := []step{
		{"gone", Leader{}, 0, false},   // none was sent first: no second none
		{"elected", a, 0, true},        // a takes office
		{"elected", a, 0, false},       // a retried announcement
		{"vacant", Leader{}, 4, false}, // an older term's vacancy
		{"elected", b, 0, true},        // b takes over from a
		{"vacant", Leader{}, 5, false}, // a's vacancy, late
		{"elected", a, 0, false},       // a's announcement, late
		{"vacant", Leader{}, 9, true},  // b leaves, nobody in line
		{"vacant", Leader{}, 9, false}, // again
		{"gone", Leader{}, 0, false},   // a read agrees
		{"elected", a, 0, false},       // a deposed leader brought back
		{"elected", Leader{Value: []byte("c"), Term: 12}, 0, true},
		{"gone", Leader{}, 0, true}, // c died: its deadline passed
	}
	var tl told
	for i, s := range steps {
		var got bool
		switch s.what {
		case "elected":
			got = tl.elected(s.x)
		case "vacant":
			got = tl.vacant(s.term)
		case "gone":
			got = tl.vacant(0)
		}
		if got != s.send {
			t.Fatalf("step %d (%s %d/%d): send %v, want %v", i+1, s.what, s.x.Term, s.term, got, s.send)
		}
	}
}
