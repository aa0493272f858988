package core

import (
	"slices"
	"testing"
	"time"

	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// TestNoTimerBefore: a write of an activity without a timer tells the
// store there is no timer index entry to delete exactly when the record
// last written (in this run, or the stored one the run began with) had no
// timer either. Every harness step also checks the index a store would
// keep (memState.checkTimers).
func TestNoTimerBefore(t *testing.T) {
	w := &world{wf: workflow(
		execAct("charge", []retry.Rule{{Policy: expo(time.Second, 3)}}),
		execAct("ship", nil, "charge"),
	)}
	h := newHarness(t, w, nil, t0)
	type write struct {
		status         record.Status
		timer, noneWas bool
	}
	writes := func(r Ready, name string) []write {
		var ws []write
		for _, m := range r.Persist {
			if a := m.Activity; a != nil && a.Name == name {
				ws = append(ws, write{a.Status, a.Timer != nil, m.NoTimerBefore})
			}
		}
		return ws
	}
	steps := []struct {
		name         string
		step         func() Ready
		charge, ship []write
	}{
		{"start", h.start,
			[]write{{record.StatusRunning, false, true}}, []write{{record.StatusPending, false, true}}},
		{"failure: a retry timer", func() Ready { return h.finish("charge", fail("exit:1")) },
			[]write{{record.StatusWaiting, true, false}}, nil},
		{"retry: the last write had a timer", func() Ready { h.at(time.Second); return h.tick() },
			[]write{{record.StatusRunning, false, false}}, nil},
		{"success, and the downstream starts", func() Ready { return h.finish("charge", nil) },
			[]write{{record.StatusSucceeded, false, true}}, []write{{record.StatusRunning, false, true}}},
		{"downstream succeeds", func() Ready { return h.finish("ship", nil) },
			nil, []write{{record.StatusSucceeded, false, true}}},
		{"charge fails again: a retry timer", func() Ready {
			// A new run over that state: charge runs again (its
			// definition "changed"), ship after it.
			w.modes = map[string]Mode{"charge": ModeFresh, "ship": ModeFresh}
			h = newHarness(t, w, h.state, h.now)
			h.start()
			return h.finish("charge", fail("exit:1"))
		}, []write{{record.StatusWaiting, true, false}}, nil},
		{"a third run resumes the retry: the stored record has a timer", func() Ready {
			w.modes = nil
			h = newHarness(t, w, h.state, h.now.Add(time.Second))
			return h.start()
		}, []write{{record.StatusRunning, false, false}}, nil},
	}
	for _, s := range steps {
		r := s.step()
		if got := writes(r, "charge"); !slices.Equal(got, s.charge) {
			t.Errorf("%s: charge written %+v, want %+v", s.name, got, s.charge)
		}
		if got := writes(r, "ship"); !slices.Equal(got, s.ship) {
			t.Errorf("%s: ship written %+v, want %+v", s.name, got, s.ship)
		}
	}
}
