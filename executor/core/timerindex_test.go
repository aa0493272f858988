package core

import (
	"slices"
	"testing"
	"time"

	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// TestNoTimerBefore: a write of an activity without a timer tells the
// store there is no timer index entry to delete exactly when the core's
// last write of it had no timer either; the first write of a run says
// nothing (the stored record is not the core's). Every harness step also
// checks the index a store would keep (memState.checkTimers).
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
			[]write{{record.StatusRunning, false, false}}, []write{{record.StatusPending, false, false}}},
		{"failure: a retry timer", func() Ready { return h.finish("charge", fail("exit:1")) },
			[]write{{record.StatusWaiting, true, false}}, nil},
		{"retry: the last write had a timer", func() Ready { h.at(time.Second); return h.tick() },
			[]write{{record.StatusRunning, false, false}}, nil},
		{"success, and the downstream starts", func() Ready { return h.finish("charge", nil) },
			[]write{{record.StatusSucceeded, false, true}}, []write{{record.StatusRunning, false, true}}},
		{"downstream succeeds", func() Ready { return h.finish("ship", nil) },
			nil, []write{{record.StatusSucceeded, false, true}}},
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
