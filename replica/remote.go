package replica

import (
	"slices"
	"time"
)

// This file is the remote-WAL follower's per-partition planner: which
// slices of the metadata index to read next, which epochs to ask the
// leader about, and when to fall back to fetching records from the
// leader. Package follower's reader keeps the slices, reads them and
// appends them; it asks PlanRemote what to do next, each time something
// changes (the index, a read finished, the leader's log end, a timer).

// RemoteSlice is what the planner reads of one slice the metadata index
// lists for a partition.
type RemoteSlice struct {
	BaseOffset, LastOffset int64
	LeaderEpoch            int32
	Length                 int64 // stored bytes
	// Object names the object the slice is stored in, for
	// RemoteLimits.MaxReadObjects (slices of one object share it; 0:
	// unknown, never ends a walk).
	Object uint64
}

// RemoteSlot is the driver's slot of one slice. The planner is given a
// partition's slots at or above its log end (some below it may remain),
// sorted in chain order: by base offset, the longest first among those
// starting at the same offset, so that a walk from the front takes each
// offset once. RemoteSlice returns the slot's own (fixed) description, not
// a copy: the walk over a long chain stays as cheap as a field read.
type RemoteSlot interface {
	RemoteSlice() *RemoteSlice
	// Busy: being read, or read and waiting its turn to be appended.
	Busy() bool
}

// JudgeRemote is JudgeSlice with the leader's answer for the slice's
// epoch looked up in fence (the answers to the epochs asked so far).
func JudgeRemote(epoch int32, last int64, leaderEpoch, localEpoch int32, fence map[int32]EpochAnswer) Verdict {
	var a EpochAnswer
	ok := false
	if epoch < leaderEpoch { // only an older epoch's verdict reads the answer
		a, ok = fence[epoch]
	}
	return JudgeSlice(epoch, last, leaderEpoch, localEpoch, a, ok)
}

// RemoteSummary is what PlanRemote needs from every slice at or above
// the log end, not only from the chain it walks: the highest end the
// index knows and the epochs to ask the leader about. It depends on the
// slices, the leader epoch, the local epoch and the fence answers, so the
// driver keeps it until one of those changes. As the log end moves up the
// target stays right (a slice it counted that is now below the log end
// cannot raise it past the log end); the driver computes it again when
// there are epochs to ask about, so it does not ask about slices the log
// end passed.
type RemoteSummary struct {
	Target int64   // the largest LastOffset+1 of a usable or waiting slice, 0 if none
	Ask    []int32 // slice epochs whose end to ask the leader, sorted
	Fenced int     // slices fenced off
}

// SummarizeRemote computes the summary of the slices at or above leo.
func SummarizeRemote[S RemoteSlot](sl []S, leo int64, leaderEpoch, localEpoch int32, fence map[int32]EpochAnswer) RemoteSummary {
	var s RemoteSummary
	for _, x := range sl {
		e := x.RemoteSlice()
		if e.LastOffset < leo {
			continue
		}
		switch JudgeRemote(e.LeaderEpoch, e.LastOffset, leaderEpoch, localEpoch, fence) {
		case Usable, Wait:
			s.Target = max(s.Target, e.LastOffset+1)
		case Fenced:
			s.Fenced++
		case Ask:
			if !slices.Contains(s.Ask, e.LeaderEpoch) {
				s.Ask = append(s.Ask, e.LeaderEpoch)
			}
		}
	}
	slices.Sort(s.Ask)
	return s
}

// RemoteView is the driver's state of one partition, as PlanRemote reads
// it (the slices are passed beside it).
type RemoteView struct {
	LEO          int64
	LeaderEpoch  int32
	LeaderLogEnd int64 // from the replica fetches (ObserveLeaderLogEnd)
	LocalEpoch   int32 // latest epoch of the local log; -1 when none
	Summary      RemoteSummary
	Fence        map[int32]EpochAnswer
	// Failures counts the failed reads of the slice at the log end;
	// RetryAt is when the next may start.
	Failures      int
	RetryAt       time.Time
	StuckSince    time.Time // zero: not stuck
	FallbackUntil int64     // the leader serves the log below this
	// WantedSince is when the slice at the log end was first wanted from
	// object storage (zero: not yet); RemoteLimits.FallbackAfter runs
	// from it.
	WantedSince time.Time
	// Degraded: object storage failed this partition and no probe has
	// shown it answers since; the leader serves everything meanwhile.
	Degraded bool
}

// RemoteLimits are the follower's settings the planner applies.
type RemoteLimits struct {
	ReadAheadBytes  int64         // stored bytes read or being read past the log end
	GapTimeout      time.Duration // stuck this long with nothing readable: fall back
	MaxReadAttempts int           // failed reads of the slice at the log end before falling back
	// FallbackAfter: the slice at the log end wanted from object storage
	// this long (every read and retry included) falls back to the leader;
	// 0: no time budget.
	FallbackAfter time.Duration
	// MaxReadObjects > 0 ends the walk at the first slice to read from an
	// object past the first MaxReadObjects objects it found slices to read
	// in: the driver can start no more reads than that now, so walking
	// further costs time in proportion to the backlog for nothing (the
	// slices past the end are planned by a later call). Plan is then a
	// prefix of the unbounded plan. 0: no bound.
	MaxReadObjects int
}

// GapCause says why a partition falls back to the leader for a gap.
type GapCause int

const (
	NoGap          GapCause = iota
	GapLag                  // the index has nothing at the log end yet
	GapHole                 // the index has slices above a hole
	GapFenced               // the only slices at the log end are from a cut-off epoch
	GapFutureEpoch          // the slices at the log end are from an epoch not yet known
)

// RemotePlan is what to do next for one partition.
type RemotePlan struct {
	Read          []int     // indices of the chain slices to read now, in offset order
	Ask           []int32   // slice epochs whose end to ask the leader
	StuckSince    time.Time // zero when not stuck
	Fallback      bool      // fetch from the leader at the log end
	FallbackUntil int64     // keep fetching from the leader below this
	GapCause      GapCause  // set when the fallback starts because of a gap
	WakeAt        time.Time // zero: nothing timed
	Target        int64     // the highest end known (leader, index)
	Fenced        int       // slices at or above the log end fenced off
	WantedSince   time.Time // see RemoteView; zero when nothing is wanted from object storage
	// TimedOut: the fallback starts because FallbackAfter ran out.
	TimedOut bool
}

// PlanRemote is the remote-WAL follower's per-partition policy: the one
// model of what it does next. It walks the chain of usable slices from
// the log end only as far as the read-ahead (and MaxReadObjects) reaches,
// so its cost does not grow with the backlog; only a partition stuck past
// the gap timeout looks further. read is scratch for RemotePlan.Read.
func PlanRemote[S RemoteSlot](now time.Time, v RemoteView, sl []S, lim RemoteLimits, read []int) RemotePlan {
	d := RemotePlan{FallbackUntil: v.FallbackUntil, Target: max(v.LeaderLogEnd, v.Summary.Target), Ask: v.Summary.Ask, Fenced: v.Summary.Fenced}
	wake := func(t time.Time) {
		if d.WakeAt.IsZero() || t.Before(d.WakeAt) {
			d.WakeAt = t
		}
	}
	retry := now.Before(v.RetryAt)
	if v.FallbackUntil > v.LEO {
		d.Fallback = true
	}
	if v.Degraded && d.Target > v.LEO {
		d.Fallback = true
		d.FallbackUntil = max(d.FallbackUntil, d.Target)
	}
	// The chain: the usable slices that continue the log without a gap.
	// The read-ahead counts it from the log end, busy slices included, so
	// the slice at the log end is always read: slices waiting above it can
	// never starve it.
	need, n := v.LEO, 0
	var ahead int64
	var objects objectSet
	read = read[:0]
	for i, x := range sl {
		e := x.RemoteSlice()
		if e.LastOffset < need {
			continue // in the log, or covered by the chain
		}
		if e.BaseOffset > need {
			break // a gap: everything above it waits
		}
		if JudgeRemote(e.LeaderEpoch, e.LastOffset, v.LeaderEpoch, v.LocalEpoch, v.Fence) != Usable {
			continue
		}
		n++
		need = e.LastOffset + 1
		if n == 1 {
			if !d.Fallback {
				// One budget in time for the slice at the log end, across
				// every read and every retry the store client makes.
				if lim.FallbackAfter > 0 {
					d.WantedSince = v.WantedSince
					if d.WantedSince.IsZero() {
						d.WantedSince = now
					}
					due := d.WantedSince.Add(lim.FallbackAfter)
					if d.TimedOut = !now.Before(due); !d.TimedOut {
						wake(due)
					}
				}
				if v.Failures >= lim.MaxReadAttempts || d.TimedOut {
					d.TimedOut = d.TimedOut && v.Failures < lim.MaxReadAttempts
					d.Fallback = true
					d.FallbackUntil = e.LastOffset + 1
					d.WantedSince = time.Time{}
				}
			}
			if retry {
				break
			}
		}
		if d.Fallback && e.LastOffset < d.FallbackUntil {
			continue // the leader serves these
		}
		if n > 1 && ahead >= lim.ReadAheadBytes {
			break
		}
		if !x.Busy() {
			if lim.MaxReadObjects > 0 && e.Object != 0 && !objects.has(e.Object) {
				if objects.len() >= lim.MaxReadObjects {
					break
				}
				objects.add(e.Object)
			}
			read = append(read, i)
		}
		ahead += e.Length
	}
	if n == 0 && !d.Fallback && d.Target > v.LEO && len(d.Ask) == 0 {
		d.StuckSince = v.StuckSince
		if d.StuckSince.IsZero() {
			d.StuckSince = now
		}
		if now.Sub(d.StuckSince) < lim.GapTimeout {
			wake(d.StuckSince.Add(lim.GapTimeout))
		} else {
			d.Fallback = true
			d.FallbackUntil, d.GapCause = remoteGapFallback(v, sl, d.Target)
		}
	}
	if retry {
		wake(v.RetryAt)
		return d
	}
	if len(read) > 0 {
		d.Read = read
	}
	return d
}

// remoteGapFallback says, for a partition with nothing usable at its log
// end, up to where the leader must serve it (the first usable slice above
// the log end, else target) and why.
func remoteGapFallback[S RemoteSlot](v RemoteView, sl []S, target int64) (until int64, cause GapCause) {
	until = target
	var fencedAtLEO, waitAtLEO bool
	for _, x := range sl {
		e := x.RemoteSlice()
		if e.LastOffset < v.LEO {
			continue
		}
		switch JudgeRemote(e.LeaderEpoch, e.LastOffset, v.LeaderEpoch, v.LocalEpoch, v.Fence) {
		case Usable:
			if e.BaseOffset > v.LEO {
				until = min(until, e.BaseOffset)
			}
		case Fenced:
			fencedAtLEO = fencedAtLEO || e.BaseOffset <= v.LEO
		case Wait:
			waitAtLEO = waitAtLEO || e.BaseOffset <= v.LEO
		}
		if e.BaseOffset > v.LEO && until < target {
			break // sorted by base: the first usable slice above was found
		}
	}
	switch {
	case fencedAtLEO:
		return until, GapFenced
	case waitAtLEO:
		return until, GapFutureEpoch
	case until < target:
		return until, GapHole
	}
	return until, GapLag
}

// objectSet is the few objects a walk found slices to read in, without
// allocating for the usual handful.
type objectSet struct {
	small [8]uint64
	n     int
	more  []uint64
}

func (s *objectSet) len() int { return s.n + len(s.more) }

func (s *objectSet) has(o uint64) bool {
	// The chain's slices are mostly in runs of one object: the last first.
	if s.n > 0 && len(s.more) == 0 && s.small[s.n-1] == o {
		return true
	}
	return slices.Contains(s.small[:s.n], o) || slices.Contains(s.more, o)
}

func (s *objectSet) add(o uint64) {
	if s.n < len(s.small) {
		s.small[s.n] = o
		s.n++
		return
	}
	s.more = append(s.more, o)
}
