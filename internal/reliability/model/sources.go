package model

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Scripts are the Lua sources the checker runs, one per operation, each as
// package scripts assembles it (grant.lua and queue.lua prepended to wait and
// release, semaphore.lua to the sem_ scripts). A test plants a bug by passing
// a copy with a source changed.
type Scripts struct {
	// A lock's: package scripts' Wait, Release, Refresh and FencedAcquire.
	Wait, Release, Refresh, FencedAcquire string
	// A semaphore's: SemAcquire, SemWait, SemRelease and SemRefresh.
	SemAcquire, SemWait, SemRelease, SemRefresh string
	// An election's: ElectionAnnounce, ElectionLeader and ElectionResign.
	ElectionAnnounce, ElectionLeader, ElectionResign string
}

// Leasekit returns the scripts leasekit runs: the sources of package
// scripts.
func Leasekit() Scripts {
	return Scripts{
		Wait: source(scripts.Wait), Release: source(scripts.Release),
		Refresh: source(scripts.Refresh), FencedAcquire: source(scripts.FencedAcquire),
		SemAcquire: source(scripts.SemAcquire), SemWait: source(scripts.SemWait),
		SemRelease: source(scripts.SemRelease), SemRefresh: source(scripts.SemRefresh),
		ElectionAnnounce: source(scripts.ElectionAnnounce), ElectionLeader: source(scripts.ElectionLeader),
		ElectionResign: source(scripts.ElectionResign),
	}
}

// source is s's Lua source. Package scripts exports each script as a
// *redis.Script, which hands its source only to ScriptLoad: a Scripter that
// keeps what it is asked to load, and loads nothing, reads it.
func source(s *redis.Script) string {
	var c sourceReader
	_ = s.Load(context.Background(), &c).Err() // the error is sourceReader's own
	return c.src
}

// sourceReader is a redis.Scripter whose ScriptLoad keeps the source. No
// other method is ever called.
type sourceReader struct {
	redis.Scripter
	src string
}

func (c *sourceReader) ScriptLoad(_ context.Context, src string) *redis.StringCmd {
	c.src = src
	return redis.NewStringResult("", errNotLoaded)
}

var errNotLoaded = errors.New("model: the source was read, not loaded")

// scanBound is how queue.lua's scanning bounds the entries a call looks at.
const scanBound = "left = 100}"

// scanning returns s with every script that serves a queue looking at n
// entries a call at most, rather than a hundred.
func (s Scripts) scanning(n int) (Scripts, error) {
	for _, src := range []*string{&s.Wait, &s.Release, &s.SemAcquire, &s.SemWait, &s.SemRelease, &s.SemRefresh} {
		if !strings.Contains(*src, scanBound) {
			return s, fmt.Errorf("model: a script that serves a queue no longer holds %q", scanBound)
		}
		*src = strings.ReplaceAll(*src, scanBound, fmt.Sprintf("left = %d}", n))
	}
	return s, nil
}
