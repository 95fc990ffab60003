package model

import (
	"strconv"
	"strings"
)

// redisState is what the server holds, as the checker sees it: its clock,
// the resource's keys, and the channels someone is subscribed to (which
// PUBSUB NUMSUB counts). Immutable once built: states share it.
type redisState struct {
	clock  int64 // ms
	micros int64 // the clock in µs, as TIME reads it (see protocol.now)
	keys   []rkey
	subs   []string // sorted
}

// rkey is one key: its type, its content and its remaining ttl.
type rkey struct {
	name, typ string
	ttl       int64 // ms; -1 without expiry
	// items: a string's value; a sorted set's members and scores, in
	// ZRANGE order; a hash's fields and values, by field.
	items []string
}

// key returns the key called name, or nil.
func (st redisState) key(name string) *rkey {
	for i := range st.keys {
		if st.keys[i].name == name {
			return &st.keys[i]
		}
	}
	return nil
}

// encode appends st's canonical form to b.
func (st redisState) encode(b []byte) []byte {
	b = strconv.AppendInt(b, st.clock, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, st.micros, 10)
	for _, k := range st.keys {
		b = append(b, '|')
		b = append(b, k.name...)
		b = append(b, ' ')
		b = append(b, k.typ...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, k.ttl, 10)
		for _, it := range k.items {
			b = append(b, 0)
			b = append(b, it...)
		}
	}
	b = append(b, '#')
	return append(b, strings.Join(st.subs, " ")...)
}

// score is a sorted set score as the checker writes it: exact for the
// integers the scripts use.
func score(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// published is a message a script published.
type published struct{ channel, msg string }
