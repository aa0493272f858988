package core

import (
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
)

func hbWorld() *world {
	a := execAct("job", []retry.Rule{{Policy: expo(time.Second, 5)}})
	a.HeartbeatTimeout = 2 * time.Second
	return &world{wf: workflow(a)}
}

func (h *harness) beat(name, details string) Ready {
	h.t.Helper()
	s := h.starts[name]
	return h.record(h.c.Heartbeats(h.now, []Heartbeat{{Workflow: s.Workflow, Instance: s.Instance, Activity: s.Activity, Number: s.Number, Details: details}}))
}

// TestHeartbeatDetailsReachTheNextAttempt: the attempt carries its
// heartbeat_timeout; the details it wrote are kept (committed at most
// once a second), and the next attempt gets them, after a
// heartbeat_timeout failure and after a crash alike.
func TestHeartbeatDetailsReachTheNextAttempt(t *testing.T) {
	w := hbWorld()
	h := newHarness(t, w, nil, t0)
	r := h.start()
	if a := r.Start[0]; a.HeartbeatTimeout != 2*time.Second || a.HeartbeatDetails != "" {
		t.Fatalf("attempt 1 = %+v", a)
	}
	h.at(500 * time.Millisecond)
	r = h.beat("job", "row 100")
	if len(r.Persist) != 1 || r.Persist[0].Activity == nil || r.Persist[0].Activity.HeartbeatDetails != "row 100" {
		t.Fatalf("the first beat's details were not committed: %+v", r.Persist)
	}
	if hb := eventsOf(r, event.Heartbeat); len(hb) != 1 || hb[0].HeartbeatDetails != "row 100" || hb[0].Attempt != 1 {
		t.Fatalf("heartbeat event = %+v", hb)
	}
	// Within the second: neither committed nor shown again.
	h.at(900 * time.Millisecond)
	if r = h.beat("job", "row 200"); len(r.Persist) != 0 || len(r.Events) != 0 {
		t.Fatalf("beat within a second: persist %v, events %v", r.Persist, types(r))
	}
	h.at(1600 * time.Millisecond)
	if r = h.beat("job", "row 300"); len(r.Persist) != 1 || len(eventsOf(r, event.Heartbeat)) != 1 {
		t.Fatalf("beat a second later: persist %v, events %v", r.Persist, types(r))
	}
	// The attempt then hangs and is killed at its deadline.
	h.at(3600 * time.Millisecond)
	res := h.result("job", &retry.Failure{Type: "heartbeat_timeout", Message: "no heartbeat for 2s"})
	res.HeartbeatDetails = "row 350"
	h.record(h.c.AttemptsDone(h.now, []Result{res}))
	h.at(4600 * time.Millisecond)
	r = h.tick()
	if len(r.Start) != 1 || r.Start[0].Number != 2 || r.Start[0].HeartbeatDetails != "row 350" {
		t.Fatalf("attempt 2 = %+v, want the details of attempt 1", r.Start)
	}

	// A crash mid-attempt: the next run starts attempt 3 with what was
	// committed.
	h.at(5 * time.Second)
	h.beat("job", "row 400")
	h2 := newHarness(t, w, h.state, t0.Add(6*time.Second))
	r = h2.start()
	if len(r.Start) != 1 || r.Start[0].Number != 3 || r.Start[0].HeartbeatDetails != "row 400" {
		t.Fatalf("after a crash: %+v", r.Start)
	}
}

// TestHeartbeatIgnoresStaleBeats: a beat of an attempt that is not the
// one running changes nothing.
func TestHeartbeatIgnoresStaleBeats(t *testing.T) {
	h := newHarness(t, hbWorld(), nil, t0)
	h.start()
	r := h.record(h.c.Heartbeats(t0, []Heartbeat{{Workflow: "order", Instance: "k1", Activity: "job", Number: 7, Details: "x"}}))
	if len(r.Persist) != 0 || len(r.Events) != 0 {
		t.Fatalf("stale beat: %+v", r)
	}
}

func TestHeartbeatDetailsBounded(t *testing.T) {
	h := newHarness(t, hbWorld(), nil, t0)
	h.start()
	big := strings.Repeat("é", MaxHeartbeatDetails)
	r := h.beat("job", "  "+big+"  ")
	got := r.Persist[0].Activity.HeartbeatDetails
	if len(got) > MaxHeartbeatDetails || !strings.HasPrefix(big, got) || len(got) < MaxHeartbeatDetails-1 {
		t.Fatalf("details of %d bytes kept as %d bytes", len(big), len(got))
	}
	if ev := eventsOf(r, event.Heartbeat)[0]; len(ev.HeartbeatDetails) > event.HeartbeatDetailsTail {
		t.Fatalf("event details %d bytes", len(ev.HeartbeatDetails))
	}
}
