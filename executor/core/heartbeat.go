package core

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wf-engine/wf/executor/event"
)

// Heartbeats (SPEC §11). The shell watches $WF_HEARTBEAT_FILE of each
// running exec attempt and kills the attempt at its deadline; the core
// keeps what the attempt last wrote (its progress details) for the next
// attempt, and tells the views it is alive.

// Heartbeat is a write to $WF_HEARTBEAT_FILE by a running attempt, as the
// shell saw it.
type Heartbeat struct {
	Workflow string
	// Instance is the instance key (not the address).
	Instance string
	Activity string
	Number   int
	// Details is what the file holds now; "" keeps the earlier details.
	Details string
}

// MaxHeartbeatDetails bounds the details kept in state (bytes).
const MaxHeartbeatDetails = 4 << 10

// heartbeatEvery bounds heartbeat events and the commits of changed
// details: at most one a second per activity. A crash loses at most the
// details of the last second; the attempt's result carries its last ones.
const heartbeatEvery = time.Second

// Heartbeats records beats of running attempts: the details are kept
// (committed at most once a second per activity) and the views hear of
// the beat (at most once a second per activity). A beat of an attempt
// that is not running any more is ignored.
func (c *Core) Heartbeats(now time.Time, hs []Heartbeat) Ready {
	return c.step(now, func() {
		for _, h := range hs {
			c.heartbeat(h)
		}
	})
}

func (c *Core) heartbeat(h Heartbeat) {
	a := c.find(h.Workflow+"/"+h.Instance, h.Activity)
	if a == nil || a.phase != phaseRunning || a.cur == nil || a.cur.Number != h.Number {
		return
	}
	if d := boundDetails(h.Details); d != "" && d != a.rec.HeartbeatDetails {
		a.rec.HeartbeatDetails = d
		if l := a.lateFields(); l.detailsSaved.IsZero() || c.now.Sub(l.detailsSaved) >= heartbeatEvery {
			l.detailsSaved = c.now
			c.markAct(a)
		}
	}
	if l := a.lateFields(); l.beatShown.IsZero() || c.now.Sub(l.beatShown) >= heartbeatEvery {
		l.beatShown = c.now
		ev := c.ev(a, event.Heartbeat)
		ev.Attempt = h.Number
		ev.HeartbeatDetails = cutDetails(a.rec.HeartbeatDetails, event.HeartbeatDetailsTail)
		c.emit(ev)
	}
}

// boundDetails trims surrounding white space and keeps at most
// MaxHeartbeatDetails bytes, cut at a rune.
func boundDetails(s string) string {
	return cutDetails(strings.TrimSpace(s), MaxHeartbeatDetails)
}

func cutDetails(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
