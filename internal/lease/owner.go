package lease

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
)

// ownerBytes is the entropy of an owner id: 128 bits.
const ownerBytes = 16

// newOwner draws an owner id from src. A short read is an error: an owner id is
// what lets a holder release its lock, and a weak one would let another guess
// it.
func newOwner(kind string, src io.Reader) (string, error) {
	if src == nil {
		src = rand.Reader
	}
	var b [ownerBytes]byte
	if src == rand.Reader {
		rand.Read(b[:]) // never fails, and b stays on the stack
	} else {
		// Read through a slice of its own: handing b to an interface
		// method would move b to the heap on the default path too.
		buf := make([]byte, ownerBytes)
		if _, err := io.ReadFull(src, buf); err != nil {
			return "", fmt.Errorf("%s: owner id source failed: %w", kind, err)
		}
		copy(b[:], buf)
	}
	var id [22]byte // base64.RawURLEncoding.EncodedLen(ownerBytes)
	base64.RawURLEncoding.Encode(id[:], b[:])
	return string(id[:]), nil
}

// redact shows the first characters of an owner id, enough to tell two apart
// in a log, never enough to release a lock with.
func redact(owner string) string {
	if len(owner) <= 4 {
		return "…"
	}
	return owner[:4] + "…"
}
