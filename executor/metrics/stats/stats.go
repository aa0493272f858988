// Package stats computes what `wf stats` shows (SPEC §9): per activity,
// across instances, from the attempt log in state: attempts, retries,
// retry rate, error types, attempt duration percentiles, and the time spent
// waiting for retries and for budgets. It reads plain records and does no
// I/O, so the numbers are the same whoever loads the state.
package stats

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

// ErrorCount is how many ended attempts failed with one error type.
type ErrorCount struct {
	Type  string
	Count int
}

// Outcomes counts attempts by outcome.
type Outcomes struct {
	Succeeded   int
	Failed      int
	Interrupted int
	Running     int
}

// Activity is the statistics of one activity of one workflow across every
// instance of that workflow in the state.
type Activity struct {
	Workflow string
	// Activity is the address "activity.NAME".
	Activity string
	// Instances is the number of instances with at least one attempt of it.
	Instances int
	// Attempts counts every attempt record, every generation; Retries those
	// after the first of their generation (the SPEC's "retry").
	Attempts   int
	Retries    int
	RetryRate  float64
	Outcomes   Outcomes
	ErrorTypes []ErrorCount
	// Timed is the number of attempts the percentiles are over: those that
	// ended, except interrupted ones (their end is when wf noticed).
	Timed int
	// DurationP50 and DurationP99 are nearest-rank percentiles; zero when
	// Timed is zero.
	DurationP50 time.Duration
	DurationP99 time.Duration
	// RetryWait is the time between a failed attempt's end and the next
	// attempt's start (or now, for a retry still waiting), for backoff and
	// Retry-After waits; BudgetWait the same for retries that waited for
	// their retry budget.
	RetryWait  time.Duration
	BudgetWait time.Duration
}

// Input is the state of one instance.
type Input struct {
	// Activities are the instance's activity records by name; they say
	// which wait is still going on.
	Activities map[string]*record.Activity
	// Attempts is the instance's attempt log, in the order the store
	// returns it: by activity, generation and number.
	Attempts []*record.Attempt
}

type key struct{ workflow, activity string }

// Builder accumulates instances.
type Builder struct {
	now       time.Time
	acts      map[key]*Activity
	durations map[key][]time.Duration
	errors    map[key]map[string]int
}

// NewBuilder returns an empty builder; now ends the waits still going on.
func NewBuilder(now time.Time) *Builder {
	return &Builder{now: now, acts: map[key]*Activity{}, durations: map[key][]time.Duration{}, errors: map[key]map[string]int{}}
}

// Add counts one instance.
func (b *Builder) Add(in Input) {
	seen := map[key]bool{}
	for i, att := range in.Attempts {
		k := key{att.Workflow, att.Activity}
		a := b.acts[k]
		if a == nil {
			a = &Activity{Workflow: att.Workflow, Activity: "activity." + att.Activity}
			b.acts[k] = a
		}
		if !seen[k] {
			seen[k] = true
			a.Instances++
		}
		a.Attempts++
		if att.Number > 1 {
			a.Retries++
		}
		switch att.Outcome {
		case record.OutcomeSucceeded:
			a.Outcomes.Succeeded++
		case record.OutcomeFailed:
			a.Outcomes.Failed++
		case record.OutcomeInterrupted:
			a.Outcomes.Interrupted++
		default:
			a.Outcomes.Running++
		}
		if att.Error != nil && att.Outcome != record.OutcomeRunning {
			if b.errors[k] == nil {
				b.errors[k] = map[string]int{}
			}
			b.errors[k][att.Error.Type]++
		}
		if !att.End.IsZero() && att.Outcome != record.OutcomeInterrupted && att.Outcome != record.OutcomeRunning {
			b.durations[k] = append(b.durations[k], max(att.End.Sub(att.Start), 0))
		}
		b.addWait(a, att, next(in.Attempts, i), in.Activities[att.Activity])
	}
}

// next is the attempt after attempts[i] in the same generation, if any.
func next(attempts []*record.Attempt, i int) *record.Attempt {
	if i+1 >= len(attempts) {
		return nil
	}
	a, n := attempts[i], attempts[i+1]
	if n.Workflow != a.Workflow || n.Instance != a.Instance || n.Activity != a.Activity || n.Generation != a.Generation {
		return nil
	}
	return n
}

// addWait adds the wait after att: until the next attempt started, or
// until now when the activity is still waiting for that retry.
func (b *Builder) addWait(a *Activity, att, nxt *record.Attempt, rec *record.Activity) {
	if att.End.IsZero() {
		return
	}
	var until time.Time
	switch {
	case nxt != nil:
		until = nxt.Start
	case att.HasWait && rec != nil && rec.Generation == att.Generation && rec.Timer != nil &&
		rec.Timer.Kind != record.TimerSleep && rec.Timer.Attempt == att.Number+1:
		until = b.now
	default:
		return
	}
	d := until.Sub(att.End)
	if d <= 0 {
		return
	}
	budget := att.WaitSource == "budget"
	if nxt == nil {
		budget = rec.Timer.Kind == record.TimerBudget || budget
	}
	if budget {
		a.BudgetWait += d
	} else {
		a.RetryWait += d
	}
}

// Result returns the activities sorted by workflow and activity.
func (b *Builder) Result() []Activity {
	out := make([]Activity, 0, len(b.acts))
	for k, a := range b.acts {
		if a.Attempts > 0 {
			a.RetryRate = float64(a.Retries) / float64(a.Attempts)
		}
		for typ, n := range b.errors[k] {
			a.ErrorTypes = append(a.ErrorTypes, ErrorCount{Type: typ, Count: n})
		}
		slices.SortFunc(a.ErrorTypes, func(x, y ErrorCount) int {
			return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Type, y.Type))
		})
		if a.ErrorTypes == nil {
			a.ErrorTypes = []ErrorCount{}
		}
		ds := b.durations[k]
		slices.Sort(ds)
		a.Timed = len(ds)
		a.DurationP50 = percentile(ds, 0.50)
		a.DurationP99 = percentile(ds, 0.99)
		out = append(out, *a)
	}
	slices.SortFunc(out, func(x, y Activity) int {
		return cmp.Or(cmp.Compare(x.Workflow, y.Workflow), cmp.Compare(x.Activity, y.Activity))
	})
	return out
}

// percentile is the nearest-rank percentile q of sorted ds: the smallest
// value with at least q of the values at or below it.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
