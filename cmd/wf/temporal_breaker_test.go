package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wftemporal "github.com/wf-engine/wf/executor/temporal"
)

// failingAPI is a loopback HTTP server that answers 503 until it is made
// healthy, and notes when each request came.
type failingAPI struct {
	*httptest.Server
	healthy atomic.Bool
	mu      sync.Mutex
	hits    []time.Time
}

func newFailingAPI(t *testing.T) *failingAPI {
	a := &failingAPI{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.hits = append(a.hits, time.Now())
		a.mu.Unlock()
		if !a.healthy.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *failingAPI) hitsBetween(from, to time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, h := range a.hits {
		if h.After(from) && h.Before(to) {
			n++
		}
	}
	return n
}

// TestTemporalSharedBreaker: two instances behind one circuit breaker, run
// by two workers, against a failing loopback API. The breaker is the
// cluster's (one wf-breaker workflow): it opens once, on the failures of
// both instances together (minimum_calls across instances, fewer than
// minimum_calls in either), and while it is open no attempt starts in
// either instance, on the instances' records, on Temporal's history and at
// the API. After the break one trial call goes through, closes it, and
// both instances succeed. wf plan and wf state show tell its state.
func TestTemporalSharedBreaker(t *testing.T) {
	api := newFailingAPI(t)
	name := fmt.Sprintf("api_%d", time.Now().UnixNano())
	act := func(wf string) string {
		return `
workflow "` + wf + `" {
  key = "k"
  activity "call" {
    http { url = "` + api.URL + `/charge" }
    retry {
      backoff          = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 40
      circuit_breaker  = circuit_breaker.` + name + `
    }
  }
}
`
	}
	e := newTEnv(t, `
circuit_breaker "`+name+`" {
  minimum_calls  = 4
  failure_ratio  = 0.5
  window         = "1m"
  break_duration = "5s"
}
`+act("cb1")+act("cb2"))
	e.worker()
	e.worker()
	p := e.apply()
	p.waitEvent(t, 60*time.Second, "circuit_opened", evType("circuit_opened"))
	api.healthy.Store(true)
	if code := p.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}

	ctx := context.Background()
	cl, err := wftemporal.Dial(ctx, wftemporal.ClientOptions{Address: e.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v, err := cl.Breaker(ctx, name)
	if err != nil || v == nil {
		t.Fatalf("breaker workflow: %v, %v", v, err)
	}
	var states []string
	for _, tr := range v.Transitions {
		states = append(states, tr.State)
	}
	if v.Opened != 1 || strings.Join(states, " ") != "open half_open closed" {
		t.Fatalf("breaker opened %d times, transitions %v; want once: open half_open closed", v.Opened, states)
	}
	open, halfOpen := v.Transitions[0], v.Transitions[1]
	if open.Failures < 4 {
		t.Errorf("it opened on %d failures, want at least minimum_calls (4)", open.Failures)
	}

	// An attempt let through just before the breaker opened may start
	// just after (the pass and the start are two steps on a cluster), so
	// Temporal's history is read for when each attempt asked: an attempt
	// scheduled while the breaker was open must have asked before it
	// opened. On the runs' records and at the API, the break itself (past
	// a grace for those hand-overs) is quiet.
	const grace = 2 * time.Second
	from, to := open.Time.Add(grace), halfOpen.Time
	failedBefore := map[string]int{}
	for _, inst := range []string{"cb1/k", "cb2/k"} {
		hs := e.history(inst)
		if n := len(hs); n == 0 || hs[n-1].Outcome != "succeeded" {
			t.Fatalf("%s: history %+v, want it to end with a success", inst, hs)
		}
		for _, h := range hs {
			if h.Start.After(from) && h.Start.Before(to) {
				t.Errorf("%s: attempt %d started at %s, while the breaker was open (%s to %s)", inst, h.Attempt,
					h.Start.Format(time.StampMilli), open.Time.Format(time.StampMilli), to.Format(time.StampMilli))
			}
			if h.Outcome == "failed" && !h.End.After(open.Time) {
				failedBefore[inst]++
			}
		}
		for _, a := range attemptAsks(t, cl, "wf/"+inst) {
			if a.scheduled.After(open.Time) && a.scheduled.Before(to) && !a.asked.Before(open.Time) {
				t.Errorf("%s: Temporal scheduled an attempt at %s that asked the breaker at %s, while it was open (%s to %s)", inst,
					a.scheduled.Format(time.StampMilli), a.asked.Format(time.StampMilli), open.Time.Format(time.StampMilli), to.Format(time.StampMilli))
			}
		}
	}
	if failedBefore["cb1/k"]+failedBefore["cb2/k"] < 4 {
		t.Errorf("failures before the opening by instance: %v; want minimum_calls (4) across both", failedBefore)
	}
	// Both instances waited for it: the one with fewer than
	// minimum_calls failures of its own too.
	waited := map[any]int{}
	for _, ev := range p.snapshot() {
		if ev["type"] == "circuit_wait" {
			waited[ev["workflow"]]++
		}
	}
	if waited["cb1"] == 0 || waited["cb2"] == 0 {
		t.Errorf("circuit_wait events by workflow: %v (failures before the opening %v); want both instances to wait", waited, failedBefore)
	}
	if n := api.hitsBetween(from, to); n != 0 {
		t.Errorf("the API got %d requests while the breaker was open", n)
	}

	out, errOut, code := e.wf("state", "show", "-engine", "temporal", "cb1/k")
	if code != 0 || !strings.Contains(out, "circuit breakers (shared by the cluster)") || !strings.Contains(out, name+"  closed") || !strings.Contains(out, "opened 1 time;") {
		t.Errorf("wf state show (exit %d) does not show the closed breaker that opened once:\n%s%s", code, out, errOut)
	}
	out, errOut, code = e.wf("plan", "-engine", "temporal", "-replace", "cb1.activity.call", "-replace", "cb2.activity.call", e.dir)
	if code != 0 || !strings.Contains(out, "breaker "+name+": closed") {
		t.Errorf("wf plan (exit %d) does not show the breaker closed:\n%s%s", code, out, errOut)
	}
}

// attemptAsk is one attempt in an instance's Temporal history: when it
// was scheduled, and when the breaker call before it (its ask) started.
type attemptAsk struct{ scheduled, asked time.Time }

func attemptAsks(t *testing.T, cl *wftemporal.Client, id string) []attemptAsk {
	t.Helper()
	iter := cl.SDK.GetWorkflowHistory(context.Background(), id, "", false, 0)
	types := map[int64]string{} // scheduled event ID -> activity type
	var out []attemptAsk
	var asked time.Time
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
			if a.GetActivityType().GetName() == wftemporal.AttemptActivity {
				if asked.IsZero() {
					t.Fatalf("history of %s: an attempt was scheduled without asking the breaker", id)
				}
				out = append(out, attemptAsk{scheduled: ev.GetEventTime().AsTime(), asked: asked})
				asked = time.Time{}
			}
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && types[a.GetScheduledEventId()] == wftemporal.BreakerActivity {
			asked = ev.GetEventTime().AsTime()
		}
	}
	if len(out) == 0 {
		t.Fatalf("history of %s has no attempt", id)
	}
	return out
}
