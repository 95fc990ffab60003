package model

import (
	"fmt"
	"strings"

	"github.com/leasekit/leasekit/scripts"
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
		Wait: scripts.Wait.Source, Release: scripts.Release.Source,
		Refresh: scripts.Refresh.Source, FencedAcquire: scripts.FencedAcquire.Source,
		SemAcquire: scripts.SemAcquire.Source, SemWait: scripts.SemWait.Source,
		SemRelease: scripts.SemRelease.Source, SemRefresh: scripts.SemRefresh.Source,
		ElectionAnnounce: scripts.ElectionAnnounce.Source, ElectionLeader: scripts.ElectionLeader.Source,
		ElectionResign: scripts.ElectionResign.Source,
	}
}

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
