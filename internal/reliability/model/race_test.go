//go:build race

package model

// raceEnabled: the race detector slows every step several times over, so
// the checks explore less deeply under it (their point there is the
// explorer's own goroutines).
const raceEnabled = true
