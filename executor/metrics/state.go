package metrics

import (
	"slices"
	"strings"
	"time"

	"github.com/wf-engine/wf/executor/event"
)

// Attempt outcomes, the values of wf_attempts_total's outcome label.
const (
	outcomeSucceeded = iota
	outcomeFailed
	outcomeInterrupted
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"succeeded", "failed", "interrupted"}

// maxErrorTypes bounds the error_type values of one activity: an activity
// that writes a new error type on every failure (an ID in it, say) must not
// grow the scrape without bound. Further types are counted as "other".
const maxErrorTypes = 64

// otherErrorType is where error types beyond maxErrorTypes are counted.
const otherErrorType = "other"

// unknownErrorType counts a retry whose previous error is not known.
const unknownErrorType = "unknown"

// Histogram buckets (upper bounds, seconds). Few and wide for the two
// per-activity histograms, since each bucket is a series per activity.
var (
	durationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 300}
	delayBuckets    = []float64{0.1, 0.5, 1, 5, 15, 60, 300, 3600}
	latenessBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60}
)

// hist is a classic histogram: counts per bucket (not cumulative; the last
// is +Inf), their sum and count.
type hist struct {
	counts []uint64 // nil until the first observation
	sum    float64
	n      uint64
}

func (h *hist) observe(upper []float64, v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(upper)+1)
	}
	i, _ := slices.BinarySearch(upper, v) // first bound >= v: le semantics
	h.counts[i]++
	h.sum += v
	h.n++
}

// count is one labelled counter of an activity; esc is its extra label
// pairs, escaped, e.g. `error_type="http:503"`.
type count struct {
	value string // the label value (error type; status/reason)
	extra string // status only: the reason
	esc   string
	n     uint64
}

// actStats are the per-activity series (labels workflow, activity).
type actStats struct {
	workflow, activity string
	labels             string // `workflow="…",activity="…"`, escaped
	attempts           [numOutcomes]uint64
	retries            []count // by error type, first seen first
	ends               []count // by status and reason
	duration           hist
	delay              hist
}

func (a *actStats) retryCount(errType string) *count {
	for i := range a.retries {
		if a.retries[i].value == errType {
			return &a.retries[i]
		}
	}
	if len(a.retries) >= maxErrorTypes-1 && errType != otherErrorType {
		return a.retryCount(otherErrorType) // the last slot is "other"
	}
	a.retries = append(a.retries, count{value: errType, esc: `error_type="` + escape(errType) + `"`})
	return &a.retries[len(a.retries)-1]
}

func (a *actStats) end(status, reason string) {
	for i := range a.ends {
		if a.ends[i].value == status && a.ends[i].extra == reason {
			a.ends[i].n++
			return
		}
	}
	a.ends = append(a.ends, count{value: status, extra: reason, n: 1,
		esc: `status="` + escape(status) + `",reason="` + escape(reason) + `"`})
}

// budgetStats is what the last event about a budget said about it.
type budgetStats struct {
	name       string
	esc        string // `budget="…"`
	maxRetries int
	window     time.Duration
	// stamps is the window's grant times when the events carry them (in
	// process); used is the count of the last event otherwise.
	stamps    []time.Time
	hasStamps bool
	used      int
	// exhausted counts refusals by what followed: [0] wait, [1] fail.
	exhausted     [2]uint64
	seenExhausted [2]bool
}

var exhaustedNames = [2]string{"wait", "fail"}

// usedAt counts the grants in the window (now-window, now], the same
// half-open window as retry.Budget.
func (b *budgetStats) usedAt(now time.Time) int {
	if !b.hasStamps {
		return b.used
	}
	from := now.Add(-b.window)
	n := 0
	for _, t := range b.stamps {
		if t.After(from) && !t.After(now) {
			n++
		}
	}
	return n
}

func (b *budgetStats) ratio(used int) float64 {
	switch {
	case b.maxRetries > 0:
		return float64(used) / float64(b.maxRetries)
	case used > 0:
		return 1
	default:
		return 0
	}
}

// instKey names one activity of one instance.
type instKey struct{ instance, activity string }

// track is what the metrics remember about one activity of one instance
// while it is not done.
type track struct {
	act      *actStats
	pending  bool      // a timer is recorded (retry, budget or sleep)
	running  bool      // an exec/http attempt is in flight
	overdue  bool      // its timer was overdue when recovered: lateness is downtime, not counted
	sleepDue time.Time // a sleep's wake-up time
	// awaitDelay is set by attempt_failed: the next retry_scheduled or
	// budget_wait is the retry decision, whose wait is observed once.
	awaitDelay bool
}

type actKey struct{ workflow, activity string }

// state is everything Metrics counts. Not safe for concurrent use: Metrics
// guards it.
type state struct {
	acts     map[actKey]*actStats
	order    []*actStats // sorted by (workflow, activity) when !unsorted
	unsorted bool
	tracks   map[instKey]*track
	budgets  map[string]*budgetStats
	bOrder   []*budgetStats
	circuits map[string]*circuitStats
	cOrder   []*circuitStats
	pending  int
	running  int
	lateness hist
}

type circuitStats struct {
	name, esc string
	state     float64
}

func newState() state {
	return state{
		acts:     map[actKey]*actStats{},
		tracks:   map[instKey]*track{},
		budgets:  map[string]*budgetStats{},
		circuits: map[string]*circuitStats{},
	}
}

func (s *state) act(workflow, activity string) *actStats {
	k := actKey{workflow, activity}
	if a := s.acts[k]; a != nil {
		return a
	}
	a := &actStats{workflow: workflow, activity: activity,
		labels: `workflow="` + escape(workflow) + `",activity="` + escape(activity) + `"`}
	s.acts[k] = a
	if n := len(s.order); n > 0 && !s.unsorted && less(a, s.order[n-1]) {
		s.unsorted = true
	}
	s.order = append(s.order, a)
	return a
}

func less(a, b *actStats) bool {
	if a.workflow != b.workflow {
		return a.workflow < b.workflow
	}
	return a.activity < b.activity
}

// sorted returns the activities by (workflow, activity).
func (s *state) sorted() []*actStats {
	if s.unsorted {
		slices.SortFunc(s.order, func(a, b *actStats) int {
			if less(a, b) {
				return -1
			}
			if less(b, a) {
				return 1
			}
			return 0
		})
		s.unsorted = false
	}
	return s.order
}

func (s *state) track(e *event.Event) *track {
	k := instKey{e.Instance, e.Activity}
	if t := s.tracks[k]; t != nil {
		return t
	}
	t := &track{act: s.act(e.Workflow, e.Activity)}
	s.tracks[k] = t
	return t
}

func (s *state) budget(name string) *budgetStats {
	if b := s.budgets[name]; b != nil {
		return b
	}
	b := &budgetStats{name: name, esc: `budget="` + escape(name) + `"`}
	s.budgets[name] = b
	s.bOrder = append(s.bOrder, b)
	slices.SortFunc(s.bOrder, func(x, y *budgetStats) int { return strings.Compare(x.name, y.name) })
	return b
}

func (s *state) setPending(t *track, on bool) {
	if t.pending != on {
		t.pending = on
		if on {
			s.pending++
		} else {
			s.pending--
		}
	}
}

func (s *state) setRunning(t *track, on bool) {
	if t.running != on {
		t.running = on
		if on {
			s.running++
		} else {
			s.running--
		}
	}
}

func seconds(ms *int64) (float64, bool) {
	if ms == nil {
		return 0, false
	}
	return float64(*ms) / 1000, true
}

func (s *state) observeLateness(d time.Duration) {
	s.lateness.observe(latenessBuckets, max(d, 0).Seconds())
}

// apply counts one event. Counters follow what the attempt log records:
// an attempt is counted when it ends, by outcome; a retry when it starts,
// under the error of the attempt it retries; an activity when it ends.
func (s *state) apply(e *event.Event) {
	// Every level of a nested budget has its own gauges.
	for u := e.Budget; u != nil; u = u.Parent {
		s.noteBudget(u)
	}
	switch e.Type {
	case event.Plan:
		// Breakers get their series from the start, in the state they
		// were loaded in.
		for _, c := range e.Circuits {
			s.circuit(c.Name).state = circuitStateValue(c.State)
		}
		// Activities about to run get their series at zero now, so that a
		// rate() over their first attempts sees them rise from zero.
		for _, info := range e.Activities {
			if info.Action != "unchanged" {
				s.act(e.Workflow, info.Activity)
			}
		}
	case event.AttemptStarted:
		t := s.track(e)
		s.setPending(t, false)
		if e.Kind == "sleep" {
			s.setPending(t, true)
			t.sleepDue = time.Time{}
			if e.FireAt != nil {
				t.sleepDue = *e.FireAt
			}
		} else {
			s.setRunning(t, true)
		}
		if e.Attempt > 1 {
			typ := unknownErrorType
			if e.PreviousError != nil && e.PreviousError.Type != "" {
				typ = e.PreviousError.Type
			}
			t.act.retryCount(typ).n++
		}
		if e.ScheduledAt != nil && !t.overdue {
			s.observeLateness(e.Time.Sub(*e.ScheduledAt))
		}
		t.overdue, t.awaitDelay = false, false
	case event.AttemptSucceeded:
		t := s.track(e)
		t.act.attempts[outcomeSucceeded]++
		if v, ok := seconds(e.DurationMs); ok {
			t.act.duration.observe(durationBuckets, v)
		}
		s.setRunning(t, false)
		if e.Kind == "sleep" {
			if t.pending && !t.overdue && !t.sleepDue.IsZero() {
				s.observeLateness(e.Time.Sub(t.sleepDue))
			}
			s.setPending(t, false)
		}
	case event.AttemptFailed:
		t := s.track(e)
		typ := unknownErrorType
		if e.Error != nil && e.Error.Type != "" {
			typ = e.Error.Type
		}
		if typ == "interrupted" {
			// Not timed: the end of an attempt found running after a crash
			// is when wf noticed, not when the attempt stopped.
			t.act.attempts[outcomeInterrupted]++
		} else {
			t.act.attempts[outcomeFailed]++
			if v, ok := seconds(e.DurationMs); ok {
				t.act.duration.observe(durationBuckets, v)
			}
		}
		// The retry of this error, if any, then rises from zero.
		t.act.retryCount(typ)
		s.setRunning(t, false)
		t.awaitDelay = true
	case event.RetryScheduled:
		t := s.track(e)
		s.setPending(t, true)
		s.observeDecision(t, e)
	case event.BudgetWait:
		t := s.track(e)
		s.setPending(t, true)
		s.observeDecision(t, e)
		if u := refusing(e.Budget); u != nil {
			b := s.budget(u.Name)
			b.exhausted[0]++
			b.seenExhausted[0] = true
		}
	case event.CircuitWait:
		// Waiting for a breaker is pending, like a retry timer.
		s.setPending(s.track(e), true)
	case event.TimerRecovered:
		t := s.track(e)
		s.setPending(t, true)
		t.overdue = e.FireAt != nil && !e.FireAt.After(e.Time)
		if e.Kind == "sleep" && e.FireAt != nil {
			t.sleepDue = *e.FireAt
		}
	case event.ActivitySucceeded:
		s.finish(e, "succeeded")
	case event.ActivityFailed:
		s.finish(e, "failed")
		if u := refusing(e.Budget); e.Reason == event.ReasonBudgetExhausted && u != nil {
			b := s.budget(u.Name)
			b.exhausted[1]++
			b.seenExhausted[1] = true
		}
	case event.ActivitySkipped:
		s.finish(e, "skipped")
	case event.CircuitOpened, event.CircuitHalfOpen, event.CircuitClosed:
		if e.Breaker != "" {
			s.circuit(e.Breaker).state = circuitValue(e.Type)
		}
	}
}

// observeDecision observes the wait of a retry decision: the first
// retry_scheduled or budget_wait after a failure. Later ones for the same
// retry (a budget that frees, a retry fired by hand) are the same decision.
func (s *state) observeDecision(t *track, e *event.Event) {
	if !t.awaitDelay {
		return
	}
	t.awaitDelay = false
	if v, ok := seconds(e.DelayMs); ok {
		t.act.delay.observe(delayBuckets, v)
	}
}

// finish counts an activity's end and forgets its track.
func (s *state) finish(e *event.Event, status string) {
	k := instKey{e.Instance, e.Activity}
	if t := s.tracks[k]; t != nil {
		s.setPending(t, false)
		s.setRunning(t, false)
		delete(s.tracks, k)
	}
	s.act(e.Workflow, e.Activity).end(status, e.Reason)
}

func (s *state) noteBudget(u *event.BudgetUsage) {
	b := s.budget(u.Name)
	b.maxRetries = u.MaxRetries
	b.window = time.Duration(u.WindowMs) * time.Millisecond
	b.used = u.Used
	b.stamps = u.Stamps
	b.hasStamps = u.Stamps != nil || u.Used == 0
}

// refusing is the level of a (nested) budget that refused a retry: the
// first exhausted one, else the budget itself.
func refusing(u *event.BudgetUsage) *event.BudgetUsage {
	if ex := u.Exhausted(); ex != nil {
		return ex
	}
	return u
}

// circuitStateValue is circuitValue for a CircuitInfo state.
func circuitStateValue(state string) float64 {
	switch state {
	case event.CircuitStateOpen:
		return 2
	case event.CircuitStateHalfOpen:
		return 1
	}
	return 0
}

// circuitValue is wf_circuit_state's value: 0 closed, 1 half-open, 2 open.
func circuitValue(t event.Type) float64 {
	switch t {
	case event.CircuitOpened:
		return 2
	case event.CircuitHalfOpen:
		return 1
	default:
		return 0
	}
}

func (s *state) circuit(name string) *circuitStats {
	if c := s.circuits[name]; c != nil {
		return c
	}
	c := &circuitStats{name: name, esc: `breaker="` + escape(name) + `"`}
	s.circuits[name] = c
	s.cOrder = append(s.cOrder, c)
	slices.SortFunc(s.cOrder, func(x, y *circuitStats) int { return strings.Compare(x.name, y.name) })
	return c
}

// clean makes v a valid label value: Prometheus wants UTF-8.
func clean(v string) string { return strings.ToValidUTF8(v, "\uFFFD") }

// escape makes v a label value of the text format: valid UTF-8, with
// backslash, double quote and newline escaped.
func escape(v string) string {
	v = clean(v)
	if !strings.ContainsAny(v, "\\\"\n") {
		return v
	}
	return labelEscaper.Replace(v)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
