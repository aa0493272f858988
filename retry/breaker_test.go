package retry

import (
	"testing"
	"time"
)

var bt0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func sec(n float64) time.Time { return bt0.Add(time.Duration(n * float64(time.Second))) }

func testBreaker() Breaker {
	return Breaker{Name: "api", FailureRatio: 0.5, MinimumCalls: 4, Window: 10 * time.Second, BreakDuration: 30 * time.Second, HalfOpenCalls: 2}
}

func TestBreakerClassify(t *testing.T) {
	all := Breaker{}
	only := Breaker{Failures: []string{"http:5*", "timeout"}}
	for _, tc := range []struct {
		b    Breaker
		typ  string
		want Outcome
	}{
		{all, "exit:1", OutcomeFailure},
		{all, "http:402", OutcomeFailure},
		{all, "interrupted", OutcomeIgnored},
		{only, "http:503", OutcomeFailure},
		{only, "timeout", OutcomeFailure},
		{only, "http:402", OutcomeSuccess},
		{Breaker{Failures: []string{"*"}}, "interrupted", OutcomeIgnored},
	} {
		if got := tc.b.Classify(tc.typ); got != tc.want {
			t.Errorf("Classify(%q) with failures %v = %v, want %v", tc.typ, tc.b.Failures, got, tc.want)
		}
	}
}

// TestBreakerOpensAfterMinimumCalls: the ratio alone does not open it;
// it takes minimum_calls outcomes in the window.
func TestBreakerOpensAfterMinimumCalls(t *testing.T) {
	b := testBreaker()
	c := Circuit{State: CircuitClosed}
	for i := range 3 {
		c = b.Record(c, 0, OutcomeFailure, sec(float64(i)))
		if c.State != CircuitClosed {
			t.Fatalf("opened after %d failures, below minimum_calls 4", i+1)
		}
	}
	c = b.Record(c, 0, OutcomeFailure, sec(3))
	if c.State != CircuitOpen || !c.HalfOpenAt.Equal(sec(33)) || c.Epoch != 1 || c.Since != sec(3) {
		t.Fatalf("after the 4th failure: %+v, want open until +33s in epoch 1", c)
	}
	if len(c.Buckets) != 0 {
		t.Fatalf("an open circuit keeps its window: %+v", c)
	}
}

func TestBreakerRatio(t *testing.T) {
	b := testBreaker()
	c := Circuit{State: CircuitClosed}
	// 3 successes, then failures: 3 of 6 is 0.5 -> opens at the 3rd failure.
	for i := range 3 {
		c = b.Record(c, 0, OutcomeSuccess, sec(float64(i)))
	}
	c = b.Record(c, 0, OutcomeFailure, sec(3))
	c = b.Record(c, 0, OutcomeFailure, sec(4))
	if c.State != CircuitClosed {
		t.Fatalf("2 of 5 failed (0.4 < 0.5): %s", c.State)
	}
	if calls, failures := b.Calls(c, sec(4)); calls != 5 || failures != 2 {
		t.Fatalf("Calls = %d, %d; want 5, 2", calls, failures)
	}
	c = b.Record(c, 0, OutcomeFailure, sec(5))
	if c.State != CircuitOpen {
		t.Fatalf("3 of 6 failed: %s, want open", c.State)
	}
}

// TestBreakerWindowSlides: outcomes older than the window no longer count.
func TestBreakerWindowSlides(t *testing.T) {
	b := testBreaker()
	c := Circuit{State: CircuitClosed}
	for i := range 3 {
		c = b.Record(c, 0, OutcomeFailure, sec(float64(i)))
	}
	// At +10s the failure at 0 has left (window (0, 10]); at +11 also 1.
	c = b.Record(c, 0, OutcomeFailure, sec(11))
	if c.State != CircuitClosed {
		t.Fatalf("old failures still counted: %+v", c)
	}
	if calls, failures := b.Calls(c, sec(11)); calls != 2 || failures != 2 || len(c.Buckets) != 2 {
		t.Fatalf("window not pruned: %d calls, %d failures in %+v", calls, failures, c.Buckets)
	}
	if calls, _ := b.Calls(c, sec(30)); calls != 0 {
		t.Fatalf("calls at +30s = %d", calls)
	}
}

func TestBreakerHalfOpen(t *testing.T) {
	b := testBreaker()
	open := Circuit{State: CircuitOpen, Since: sec(0), HalfOpenAt: sec(30), Epoch: 1}
	if ok, wait := b.Permit(open, sec(29), 0); ok || !wait.Equal(sec(30)) {
		t.Fatalf("open: Permit = %v %v", ok, wait)
	}
	if c, changed := b.At(open, sec(29.999)); changed || c.State != CircuitOpen {
		t.Fatalf("half-open early: %+v", c)
	}
	half, changed := b.At(open, sec(31))
	if !changed || half.State != CircuitHalfOpen || half.Since != sec(30) || half.Epoch != 2 {
		t.Fatalf("At after the break = %+v %v", half, changed)
	}
	// Two trial slots.
	if ok, _ := b.Permit(half, sec(31), 1); !ok {
		t.Fatal("second trial refused")
	}
	if ok, wait := b.Permit(half, sec(31), 2); ok || !wait.IsZero() {
		t.Fatalf("third trial: %v %v, want refused until a trial ends", ok, wait)
	}
	// An outcome from the closed epoch is not a trial.
	if c := b.Record(half, 0, OutcomeSuccess, sec(32)); c.TrialSuccesses != 0 {
		t.Fatalf("stale outcome counted: %+v", c)
	}
	c := b.Record(half, 2, OutcomeSuccess, sec(32))
	if c.State != CircuitHalfOpen || c.TrialSuccesses != 1 {
		t.Fatalf("after one trial success: %+v", c)
	}
	if ok, _ := b.Permit(c, sec(32), 1); ok {
		t.Fatal("a slot beyond half_open_calls was given (one succeeded, one in flight)")
	}
	closed := b.Record(c, 2, OutcomeSuccess, sec(33))
	if closed.State != CircuitClosed || closed.Epoch != 3 || len(closed.Buckets) != 0 {
		t.Fatalf("after both trials: %+v, want closed", closed)
	}
	reopened := b.Record(c, 2, OutcomeFailure, sec(33))
	if reopened.State != CircuitOpen || !reopened.HalfOpenAt.Equal(sec(63)) || reopened.Epoch != 3 {
		t.Fatalf("a failed trial: %+v, want open until +63s", reopened)
	}
	if c := b.Record(half, 2, OutcomeIgnored, sec(33)); c.State != CircuitHalfOpen || c.TrialSuccesses != 0 {
		t.Fatalf("an interrupted trial changed the circuit: %+v", c)
	}
}

func TestBreakerOpenIgnoresLateOutcomes(t *testing.T) {
	b := testBreaker()
	open := Circuit{State: CircuitOpen, Since: sec(0), HalfOpenAt: sec(30), Epoch: 1}
	for _, o := range []Outcome{OutcomeSuccess, OutcomeFailure} {
		if c := b.Record(open, 1, o, sec(5)); c.State != CircuitOpen || !c.HalfOpenAt.Equal(sec(30)) {
			t.Fatalf("outcome %v while open changed it: %+v", o, c)
		}
	}
}

func TestAllowChain(t *testing.T) {
	t0 := bt0
	stamps := func(n int) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = t0.Add(time.Duration(i) * time.Second)
		}
		return out
	}
	child := Budget{Name: "child", MaxRetries: 2, Window: time.Minute, OnExhausted: "wait"}
	parent := Budget{Name: "parent", MaxRetries: 3, Window: 2 * time.Minute, OnExhausted: "wait"}
	failing := parent
	failing.OnExhausted = "fail"
	now := t0.Add(10 * time.Second)
	for _, tc := range []struct {
		name   string
		levels []Level
		want   ChainDecision
	}{
		{"all free", []Level{{child, nil}, {parent, nil}}, ChainDecision{OK: true, Refused: -1}},
		{"child full", []Level{{child, stamps(2)}, {parent, nil}}, ChainDecision{Refused: 0, NextFree: t0.Add(time.Minute)}},
		{"parent full", []Level{{child, nil}, {parent, stamps(3)}}, ChainDecision{Refused: 1, NextFree: t0.Add(2 * time.Minute)}},
		{"both full: waits for the later", []Level{{child, stamps(2)}, {parent, stamps(3)}}, ChainDecision{Refused: 1, NextFree: t0.Add(2 * time.Minute)}},
		{"parent fails", []Level{{child, stamps(2)}, {failing, stamps(3)}}, ChainDecision{Refused: 1, Fail: true}},
		{"a budget that never frees fails", []Level{{child, nil}, {Budget{Name: "zero", Window: time.Minute, OnExhausted: "wait"}, nil}}, ChainDecision{Refused: 1, Fail: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AllowChain(tc.levels, now); got != tc.want {
				t.Errorf("AllowChain = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestBreakerBuckets: the window is kept in WindowBuckets buckets whatever
// the call rate; an outcome counts for at most the window and at least
// the window minus one bucket (500ms here).
func TestBreakerBuckets(t *testing.T) {
	b := testBreaker()
	b.MinimumCalls = 1 << 20 // never opens
	c := Circuit{State: CircuitClosed}
	for i := range 10000 {
		c = b.Record(c, 0, OutcomeSuccess, sec(float64(i)*0.005)) // 50s of calls
	}
	if len(c.Buckets) > WindowBuckets+1 {
		t.Fatalf("%d buckets for 10,000 calls", len(c.Buckets))
	}
	c = Circuit{State: CircuitClosed}
	c = b.Record(c, 0, OutcomeFailure, sec(0.2)) // bucket [0, 0.5)
	for _, tc := range []struct {
		at   float64
		want int
	}{{0.2, 1}, {9.5, 1}, {9.99, 1}, {10, 0}, {10.2, 0}} {
		if _, f := b.Calls(c, sec(tc.at)); f != tc.want {
			t.Errorf("a failure at +0.2s counts %d at +%gs, want %d", f, tc.at, tc.want)
		}
	}
}

// TestBreakerRecordAllocates: once the window has its buckets, counting
// an outcome allocates nothing.
func TestBreakerRecordAllocates(t *testing.T) {
	b := testBreaker()
	b.MinimumCalls = 1 << 20
	c := Circuit{State: CircuitClosed}
	now := sec(0)
	for range 1000 { // warm: every bucket of the window exists
		now = now.Add(13 * time.Millisecond)
		c = b.Record(c, 0, OutcomeFailure, now)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(13 * time.Millisecond)
		c = b.Record(c, 0, OutcomeSuccess, now)
	})
	if allocs > 0 {
		t.Errorf("Record allocates %.1f times per outcome", allocs)
	}
}
