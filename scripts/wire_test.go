package scripts

import (
	"testing"
	"time"
)

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		v      string
		fenced bool
		want   Value
		ok     bool
	}{
		{"o", false, Value{Owner: "o", Expiry: -1}, true},
		{"o:7", true, Value{Owner: "o", Token: 7, Expiry: -1}, true},
		{"o:7*1500", true, Value{Owner: "o", Token: 7, Queued: true, Expiry: 1500}, true},
		{"o*", false, Value{Owner: "o", Queued: true, Expiry: -1}, true},
		{Vacant, false, Value{Queued: true, Expiry: 0}, true},
		{"o", true, Value{Owner: "o", Expiry: -1}, false},
		{"o:0", true, Value{Owner: "o", Expiry: -1}, false},
		{"o:x*5", true, Value{Owner: "o", Queued: true, Expiry: 5}, false},
	} {
		got, err := ParseValue(tc.v, tc.fenced)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseValue(%q, %v): got %+v, %v; want %+v (ok %v)", tc.v, tc.fenced, got, err, tc.want, tc.ok)
		}
	}
	if got := (Value{Expiry: 5}).LeaseLeft(Linger + time.Second); got != time.Second {
		t.Errorf("a marked key's lease: got %v left, want 1s", got)
	}
	if got := (Value{Expiry: -1}).LeaseLeft(time.Second); got != time.Second {
		t.Errorf("an unmarked key's lease: got %v left, want 1s", got)
	}
	if got := (Value{Expiry: 5}).LeaseLeft(time.Second); got != 0 {
		t.Errorf("a lapsed lease: got %v left, want 0", got)
	}
	if Grant("o:7*1500") != "o:7" || GrantValue("o", 7) != "o:7" || GrantValue("o", 0) != "o" ||
		AnyGrant("o:7") != "o:" || AnyGrant("o") != "" || Marked("o:7", 1500) != "o:7*1500" {
		t.Error("Grant, GrantValue, AnyGrant or Marked")
	}
}

func TestHeaderLimit(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   int
		ok     bool
	}{
		{"#4", 4, true},
		{"#4*", 4, true},
		{"4", 0, false},
		{"#0", 0, false},
		{"#x", 0, false},
		{"#4 x", 0, false},
		{"", 0, false},
	} {
		if got, ok := HeaderLimit(tc.header); ok != tc.ok || ok && got != tc.want {
			t.Errorf("%q: got %d, %v, want %d, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

// TestEntriesAndMessages: every generation of a waiter's entry differs only
// in its ticket; a tool reads its id and channel, never the owner; a grant
// message parses back to its id and generation, and prints as it parsed.
func TestEntriesAndMessages(t *testing.T) {
	head := EntryHead("OWNER", 1500, "e", "ID")
	if got, want := EntryText(head, 0, "p:grants:X Y"), "OWNER 1500 e 0 ID.0 p:grants:X Y"; got != want {
		t.Fatalf("entry: got %q, want %q", got, want)
	}
	e := EntryText(head, 7, "p:grants:X")
	if id, channel, ok := EntryTicket(e); !ok || id != "ID" || channel != "p:grants:X" || EntryOwner(e) != "OWNER" {
		t.Fatalf("EntryTicket: got %q, %q, %v", id, channel, ok)
	}
	if _, _, ok := EntryTicket("OWNER 1000 e 0 ID.0"); ok {
		t.Fatal("EntryTicket of an entry without a channel: got ok")
	}
	m, ok := ParseMessage("ID.7 42 12 345")
	if !ok || m != (Message{ID: "ID", Gen: 7, Token: "42", At: 12_000_345}) || m.String() != "ID.7 42 12 345" {
		t.Fatalf("message: got %+v, %v", m, ok)
	}
	if got := m.Value("OWNER"); got != "OWNER:42" {
		t.Fatalf("value of a fenced grant: got %q", got)
	}
	if m, ok := ParseMessage("ID.7 - 12 345 3"); !ok || m.Limit != 3 || m.Token != "-" || m.Value("O") != "O" || m.String() != "ID.7 - 12 345 3" {
		t.Fatalf("a permit's message: got %+v, %v", m, ok)
	}
	for _, bad := range []string{"ID.7", "ID.7 - 12 345 0", "ID.7 - 12 345 -1", "ID.7 - 12 345 x", "ID.7 - 12 345 3 4", "ID.7 - 12 1000000"} {
		if _, ok := ParseMessage(bad); ok {
			t.Fatalf("%q: parsed, want no grant", bad)
		}
	}
	if TicketID("ID.7 - 12 345") != "ID" || TicketID("ID.7") != "ID" {
		t.Fatal("TicketID")
	}
}
