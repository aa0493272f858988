package core

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
)

// stormCore is n activities behind breaker api (minimum_calls 10) when
// breaker is set, retrying every second.
func stormCore(n int, breaker bool) *Core {
	pol := retry.Policy{Backoff: retry.Fixed, InitialInterval: time.Second, MaximumInterval: time.Second,
		MaximumAttempts: 0, Jitter: retry.Jitter{Mode: retry.JitterNone}}
	var breakers map[string]retry.Breaker
	if breaker {
		pol.CircuitBreaker, pol.OnOpen = "api", "wait"
		breakers = map[string]retry.Breaker{"api": {Name: "api", FailureRatio: 0.5, MinimumCalls: 10, Window: 30 * time.Second, BreakDuration: 5 * time.Second, HalfOpenCalls: 1}}
	}
	acts := make([]*config.Activity, n)
	for i := range acts {
		acts[i] = execAct(fmt.Sprintf("a%04d", i), []retry.Rule{{Policy: pol}})
	}
	w := &world{wf: workflow(acts...)}
	return New(Options{Instances: []Instance{{Workflow: w.wf}}, Breakers: breakers, Seed: "s", StateID: testStateID, Resolve: w.resolve})
}

// BenchmarkRetryStormBreaker: 1,000 activities fail at once through one
// breaker while the downstream is down (20 s on the fake clock), then it
// recovers. Reported: how many outcomes it took to open the breaker (its
// minimum_calls is 10), how many attempts started while it was open (must
// be 0), how many trial calls the outage cost, the attempts in all (1,000
// first attempts, the trials, then 1,000 retries once it closed), the
// attempts the same storm makes without the breaker (every activity
// retrying each second through the outage), and the core's time per step.
func BenchmarkRetryStormBreaker(b *testing.B) {
	b.StopTimer()
	_, _, _, without, _ := storm(stormCore(1000, false))
	b.StartTimer()
	var calls, whileOpen, trials, attempts, steps int
	for range b.N {
		calls, whileOpen, trials, attempts, steps = storm(stormCore(1000, true))
	}
	b.ReportMetric(float64(calls), "calls_to_open")
	b.ReportMetric(float64(whileOpen), "starts_while_open")
	b.ReportMetric(float64(trials), "trial_calls")
	b.ReportMetric(float64(attempts), "attempts")
	b.ReportMetric(float64(without), "attempts_without_breaker")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
	if whileOpen != 0 || calls != 10 {
		b.Fatalf("%d attempts started while open; opened after %d calls", whileOpen, calls)
	}
}

// storm drives c through a 20 s outage of its downstream: every attempt
// takes 10 ms and fails until the outage ends.
func storm(c *Core) (calls, whileOpen, trials, attempts, steps int) {
	outageEnd := t0.Add(20 * time.Second)
	now := t0
	r := c.Start(now)
	state := event.CircuitStateClosed
	steps = 1
	for !r.Done {
		for _, e := range r.Events {
			switch e.Type {
			case event.CircuitOpened:
				if state == event.CircuitStateClosed {
					calls = e.Circuit.Calls
				}
				state = event.CircuitStateOpen
			case event.CircuitHalfOpen:
				state = event.CircuitStateHalfOpen
			case event.CircuitClosed:
				state = event.CircuitStateClosed
			case event.AttemptStarted:
				attempts++
				switch state {
				case event.CircuitStateOpen:
					whileOpen++
				case event.CircuitStateHalfOpen:
					trials++
				}
			}
		}
		steps++
		if len(r.Start) > 0 {
			now = now.Add(10 * time.Millisecond)
			rs := make([]Result, len(r.Start))
			for i, a := range r.Start {
				rs[i] = Result{Workflow: a.Workflow, Instance: a.Instance, Activity: a.Activity, Number: a.Number, End: now, Outputs: []byte(`{}`)}
				if now.Before(outageEnd) {
					rs[i].Failure = &retry.Failure{Type: "http:503"}
				}
			}
			r = c.AttemptsDone(now, rs)
			continue
		}
		if r.Wake.IsZero() {
			panic("storm: the run is stuck")
		}
		now = r.Wake
		r = c.Tick(now)
	}
	return calls, whileOpen, trials, attempts, steps
}

// BenchmarkStepBreaker: the cost of one core step (a result and its retry,
// or the start of the next attempt), with 100 activities each failing 4
// times then succeeding, results one at a time, behind a closed breaker
// that counts every outcome and without one. The breaker never opens (its
// ratio cannot be reached), so both take the same steps: the difference is
// the gate. The two runs alternate within each iteration, so that the
// load of a shared machine falls on both alike. Reported: ns per step of
// each, from the fastest quarter of the runs of each (on a shared machine
// the slow runs measure the neighbours), and their ratio.
func BenchmarkStepBreaker(b *testing.B) {
	var with, without []time.Duration
	var steps int
	b.ResetTimer()
	for i := range b.N {
		for _, breaker := range []bool{i%2 == 0, i%2 != 0} {
			d, n := stepRun(breaker)
			if breaker {
				with = append(with, d)
			} else {
				without = append(without, d)
			}
			steps = n
		}
	}
	fast := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		ds = ds[:max(1, len(ds)/4)]
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return float64(sum.Nanoseconds()) / float64(len(ds)*steps)
	}
	w, wo := fast(with), fast(without)
	b.ReportMetric(w, "ns/step_breaker")
	b.ReportMetric(wo, "ns/step_none")
	b.ReportMetric(w/wo, "ratio")
}

// stepRun runs the workload once and returns the time its steps took and
// how many there were.
func stepRun(breaker bool) (time.Duration, int) {
	const n, fails = 100, 4
	c := stormCore(n, breaker)
	if breaker {
		c.breakers["api"].cfg.FailureRatio = 1.01 // counts everything, never opens
	}
	now := t0
	begin := time.Now()
	r := c.Start(now)
	steps := 1
	running := append([]Attempt(nil), r.Start...)
	for !r.Done {
		if len(running) == 0 {
			now = r.Wake
			r = c.Tick(now)
		} else {
			a := running[0]
			running = running[1:]
			now = now.Add(time.Millisecond)
			res := Result{Workflow: a.Workflow, Instance: a.Instance, Activity: a.Activity, Number: a.Number, End: now, Outputs: []byte(`{}`)}
			if a.Number <= fails {
				res.Failure = &retry.Failure{Type: "http:503"}
			}
			r = c.AttemptsDone(now, []Result{res})
		}
		running = append(running, r.Start...)
		steps++
	}
	return time.Since(begin), steps
}
