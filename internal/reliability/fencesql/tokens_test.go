package fencesql_test

import "math/rand/v2"

// distinctTokens returns n different tokens in random order, as n grants
// would have: two writers with one token would be one grant.
func distinctTokens(n int) []uint64 {
	tokens := make([]uint64, n)
	for i, t := range rand.Perm(1000)[:n] {
		tokens[i] = uint64(t) + 1
	}
	return tokens
}
