package core

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// TestRecoveredTimersOrder: timers recovered at start-up (the heap built
// in one pass, the records handed over or copied) fire as one by one
// pushes would: the due ones at once, the others at their recorded time,
// ties in activity order; and owning the records changes no decision.
func TestRecoveredTimersOrder(t *testing.T) {
	const n = 60
	var acts []*config.Activity
	for i := range n {
		acts = append(acts, execAct(fmt.Sprintf("a%02d", i), []retry.Rule{{Policy: expo(time.Minute, 5)}}))
	}
	// Fire times in a shuffled order: a third due (some at the same
	// instant), the rest in the future, several sharing a time.
	rng := rand.New(rand.NewPCG(1, 2))
	fireAt := make([]time.Time, n)
	for i := range n {
		fireAt[i] = t0.Add(time.Duration(rng.IntN(9)-3) * 10 * time.Second)
	}
	state := func() map[string]map[string]*record.Activity {
		m := map[string]*record.Activity{}
		for i, a := range acts {
			m[a.Name] = &record.Activity{
				Workflow: "order", Instance: "k1", Name: a.Name, Generation: 1, IdempotencyKey: "wf2-" + a.Name,
				Status: record.StatusWaiting, Attempts: 1, RuleCounts: []int{1}, FirstStart: t0.Add(-time.Hour),
				Timer: &record.Timer{Kind: record.TimerRetry, FireAt: fireAt[i], Attempt: 2, Set: t0.Add(-time.Hour), Delay: time.Minute, Source: "policy"},
			}
		}
		return map[string]map[string]*record.Activity{addr: m}
	}
	run := func(own bool) ([]Ready, map[string]map[string]*record.Activity) {
		w := &world{wf: workflow(acts...)}
		loaded := state()
		c := New(Options{
			Instances:  []Instance{{Workflow: w.wf, Modes: map[string]Mode{}}},
			Activities: loaded, OwnActivities: own, StateID: testStateID, Resolve: w.resolve,
			Rand: rand.New(rand.NewPCG(3, 4)),
		})
		steps := []Ready{c.Start(t0)}
		for wake := steps[0].Wake; !wake.IsZero(); wake = steps[len(steps)-1].Wake {
			steps = append(steps, c.Tick(wake))
		}
		return steps, loaded
	}
	copied, input := run(false)
	owned, _ := run(true)
	if !reflect.DeepEqual(copied, owned) {
		t.Fatal("a core owning the loaded records decided differently from one copying them")
	}
	if input[addr]["a00"].Status != record.StatusWaiting || input[addr]["a00"].Timer == nil {
		t.Fatalf("a core copying the loaded records changed them: %+v", input[addr]["a00"])
	}

	// What one-by-one pushes would fire: by (fire time, activity order),
	// the due ones at start; each step starts its timers in activity order.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return fireAt[i].Compare(fireAt[j]) })
	var want [][]string
	var at []time.Time
	for _, i := range order {
		step := fireAt[i]
		if step.Before(t0) {
			step = t0
		}
		if len(at) == 0 || !at[len(at)-1].Equal(step) {
			at = append(at, step)
			want = append(want, nil)
		}
		want[len(want)-1] = append(want[len(want)-1], acts[i].Name)
	}
	for i := range want {
		slices.Sort(want[i])
	}
	if len(copied) != len(want) {
		t.Fatalf("%d steps, want %d (one per distinct due time)", len(copied), len(want))
	}
	for s, r := range copied {
		var got []string
		for _, a := range r.Start {
			got = append(got, a.Activity)
			if a.Number != 2 {
				t.Fatalf("step %d: %s started attempt %d, want 2", s, a.Activity, a.Number)
			}
		}
		if !slices.Equal(got, want[s]) {
			t.Fatalf("step %d (at %v): started %v, want %v", s, at[s].Sub(t0), got, want[s])
		}
	}
	// One timer_recovered per timer, in activity order, each with its
	// recorded time.
	tr := eventsOf(copied[0], event.TimerRecovered)
	if len(tr) != n {
		t.Fatalf("%d timer_recovered events, want %d", len(tr), n)
	}
	for i, ev := range tr {
		if ev.Activity != "activity."+acts[i].Name || !ev.FireAt.Equal(fireAt[i]) || *ev.DelayMs != time.Minute.Milliseconds() {
			t.Fatalf("timer_recovered %d = %s at %v, want activity.%s at %v", i, ev.Activity, ev.FireAt, acts[i].Name, fireAt[i])
		}
	}
}

// TestRecoveredDueTimersInterleaveNewOnes: the first step fires the
// recovered timers already due as one sorted run; a timer that firing
// one of them arms and that is due at once (a zero sleep downstream)
// still fires in (fire time, activity order) among them, as when every
// timer is popped from the heap in turn.
func TestRecoveredDueTimersInterleaveNewOnes(t *testing.T) {
	// Topological order: s1, s2, z1 (after s1), s3.
	acts := []*config.Activity{sleepAct("s1"), sleepAct("s2"), sleepAct("z1", "s1"), sleepAct("s3")}
	w := &world{wf: workflow(acts...), sleeps: map[string]time.Duration{"s1": time.Minute, "s2": time.Minute, "z1": 0, "s3": time.Minute}}
	sleeping := func(name string, fireAt time.Time) *record.Activity {
		return &record.Activity{
			Workflow: "order", Instance: "k1", Name: name, Generation: 1, IdempotencyKey: "wf2-" + name,
			Status: record.StatusWaiting, Attempts: 1, FirstStart: t0.Add(-time.Hour),
			Timer: &record.Timer{Kind: record.TimerSleep, FireAt: fireAt, Attempt: 1, Set: fireAt.Add(-time.Minute), Delay: time.Minute},
		}
	}
	loaded := map[string]map[string]*record.Activity{addr: {
		"s1": sleeping("s1", t0.Add(-20*time.Second)),
		"s2": sleeping("s2", t0.Add(-10*time.Second)),
		// Due exactly now, and after z1 in activity order: z1, armed by
		// s1's end at t0 + 0, comes first.
		"s3": sleeping("s3", t0),
	}}
	c := New(Options{
		Instances:  []Instance{{Workflow: w.wf, Modes: map[string]Mode{}}},
		Activities: loaded, StateID: testStateID, Resolve: w.resolve,
	})
	r := c.Start(t0)
	var got []string
	for _, ev := range eventsOf(r, event.ActivitySucceeded) {
		got = append(got, ev.Activity)
	}
	want := []string{"activity.s1", "activity.s2", "activity.z1", "activity.s3"}
	if !slices.Equal(got, want) {
		t.Fatalf("activities succeeded in the order %v, want %v", got, want)
	}
}
