package core

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testStateID is the state identity every harness core runs with.
const testStateID = "0123456789abcdef0123456789abcdef"

// memState applies Persist batches the way the real store would, so a
// test can build a second core from what the first one committed.
type memState struct {
	acts     map[string]map[string]*record.Activity
	attempts map[string]*record.Attempt // by "addr/activity/gen/number"
	budgets  map[string]*record.Budget
	insts    map[string]*record.Instance
	breakers map[string]*record.Breaker
	// timers is the timer index as statefile keeps it, by "addr/name":
	// set by a record with a timer, deleted by one without unless the
	// core said there is nothing to delete (NoTimerBefore). checkTimers
	// holds the core to what it says.
	timers map[string]bool
}

func newMemState() *memState {
	return &memState{
		acts:     map[string]map[string]*record.Activity{},
		attempts: map[string]*record.Attempt{},
		budgets:  map[string]*record.Budget{},
		insts:    map[string]*record.Instance{},
		breakers: map[string]*record.Breaker{},
		timers:   map[string]bool{},
	}
}

func (m *memState) apply(ms []record.Mutation) {
	for _, mu := range ms {
		switch {
		case mu.Activity != nil:
			addr := mu.Activity.Workflow + "/" + mu.Activity.Instance
			if m.acts[addr] == nil {
				m.acts[addr] = map[string]*record.Activity{}
			}
			cp := copyActivity(mu.Activity)
			m.acts[addr][mu.Activity.Name] = &cp
			switch tk := addr + "/" + cp.Name; {
			case cp.Timer != nil:
				m.timers[tk] = true
			case !mu.NoTimerBefore:
				delete(m.timers, tk)
			}
		case mu.Attempt != nil:
			a := *mu.Attempt
			m.attempts[attKey(a.Workflow+"/"+a.Instance, a.Activity, a.Generation, a.Number)] = &a
		case mu.Budget != nil:
			b := *mu.Budget
			m.budgets[b.Name] = &b
		case mu.Instance != nil:
			i := *mu.Instance
			m.insts[i.Address()] = &i
		case mu.DeleteActivity != nil:
			d := mu.DeleteActivity
			delete(m.acts[d.Workflow+"/"+d.Key], d.Name)
			delete(m.timers, d.Workflow+"/"+d.Key+"/"+d.Name)
		case mu.RenameActivity != nil:
			r := mu.RenameActivity
			acts := m.acts[r.Workflow+"/"+r.Key]
			if a := acts[r.From]; a != nil {
				delete(acts, r.From)
				cp := copyActivity(a)
				cp.Name = r.To
				acts[r.To] = &cp
			}
			from, to := r.Workflow+"/"+r.Key+"/"+r.From, r.Workflow+"/"+r.Key+"/"+r.To
			if m.timers[from] {
				delete(m.timers, from)
				m.timers[to] = true
			}
		case mu.Breaker != nil:
			b := *mu.Breaker
			m.breakers[b.Name] = &b
		}
	}
}

// indexTimers makes the timer index match the records, as a store's does
// when it opens: tests write records into a state directly.
func (m *memState) indexTimers() {
	clear(m.timers)
	for addr, acts := range m.acts {
		for name, a := range acts {
			if a.Timer != nil {
				m.timers[addr+"/"+name] = true
			}
		}
	}
}

// checkTimers fails t unless the timer index holds exactly the
// activities whose records have a timer: what a NoTimerBefore the core
// set wrongly would break.
func (m *memState) checkTimers(t *testing.T) {
	t.Helper()
	for addr, acts := range m.acts {
		for name, a := range acts {
			if tk := addr + "/" + name; (a.Timer != nil) != m.timers[tk] {
				t.Fatalf("timer index of %s: entry %v, record's timer %+v", tk, m.timers[tk], a.Timer)
			}
		}
	}
	for tk := range m.timers {
		i := strings.LastIndex(tk, "/")
		if a := m.activity(tk[:i], tk[i+1:]); a == nil || a.Timer == nil {
			t.Fatalf("timer index entry %s without an activity with a timer", tk)
		}
	}
}

func attKey(addr, act string, gen, n int) string {
	return addr + "/" + act + "/" + itoa(gen) + "/" + itoa(n)
}

func itoa(n int) string { return strconv.Itoa(n) }

func (m *memState) activity(addr, name string) *record.Activity { return m.acts[addr][name] }

// harness drives a Core with a fake clock and records everything.
type harness struct {
	t      *testing.T
	c      *Core
	state  *memState
	now    time.Time
	steps  []Ready
	starts map[string]Attempt // running attempts by activity name
	wf     *config.Workflow
	opts   Options
}

type world struct {
	wf      *config.Workflow
	sleeps  map[string]time.Duration
	badSpec map[string]bool
	budgets map[string]retry.Budget
	// breakers are the circuit breakers by name.
	breakers map[string]retry.Breaker
	par      int
	modes    map[string]Mode
	seed     uint64
	// seen records the upstream names each Resolve call received.
	seen map[string][]string
}

func (w *world) resolve(a *config.Activity, up map[string]cty.Value) (*config.Resolved, hcl.Diagnostics) {
	if w.seen != nil {
		for _, k := range sortedKeys(up) {
			w.seen[a.Name] = append(w.seen[a.Name], k)
		}
	}
	if w.badSpec[a.Name] {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid template", Detail: "boom"}}
	}
	if a.Kind == config.KindSleep {
		return &config.Resolved{Sleep: &config.SleepSpec{Duration: w.sleeps[a.Name]}}, nil
	}
	return &config.Resolved{Exec: &config.ExecSpec{Command: []string{"run", a.Name}, Dir: "/"}}, nil
}

func newHarness(t *testing.T, w *world, st *memState, now time.Time) *harness {
	t.Helper()
	if st == nil {
		st = newMemState()
	}
	opts := Options{
		Instances:     []Instance{{Workflow: w.wf, Modes: w.modes}},
		Budgets:       w.budgets,
		Breakers:      w.breakers,
		BreakerState:  st.breakers,
		Parallelism:   w.par,
		Rand:          rand.New(rand.NewPCG(w.seed, 7)),
		Activities:    st.acts,
		BudgetState:   st.budgets,
		InstanceState: st.insts,
		StateID:       testStateID,
		Resolve:       w.resolve,
	}
	h := &harness{t: t, state: st, now: now, starts: map[string]Attempt{}, wf: w.wf, opts: opts}
	h.c = New(opts)
	return h
}

func (h *harness) record(r Ready) Ready {
	h.t.Helper()
	if len(h.steps) == 0 {
		// The state as a store opens it (however the test built it).
		h.state.indexTimers()
	}
	h.steps = append(h.steps, r)
	h.state.apply(r.Persist)
	h.state.checkTimers(h.t)
	for _, s := range r.Start {
		if _, dup := h.starts[s.Activity]; dup {
			h.t.Fatalf("activity %s started twice concurrently", s.Activity)
		}
		h.starts[s.Activity] = s
	}
	return r
}

func (h *harness) start() Ready { return h.record(h.c.Start(h.now)) }

func (h *harness) at(d time.Duration) { h.now = t0.Add(d) }

// finish reports the running attempt of name as done at the current time.
func (h *harness) finish(name string, f *retry.Failure) Ready {
	h.t.Helper()
	return h.record(h.c.AttemptsDone(h.now, []Result{h.result(name, f)}))
}

func (h *harness) result(name string, f *retry.Failure) Result {
	h.t.Helper()
	s, ok := h.starts[name]
	if !ok {
		h.t.Fatalf("activity %s is not running", name)
	}
	delete(h.starts, name)
	res := Result{Workflow: s.Workflow, Instance: s.Instance, Activity: s.Activity, Number: s.Number, Start: h.now, End: h.now, Failure: f}
	if f == nil {
		res.Outputs = []byte(`{"stdout":"ok"}`)
	}
	return res
}

// interrupt reports the running attempt of name as cut short by the
// engine (a second Ctrl-C, the end of the grace period).
func (h *harness) interrupt(name string) Ready {
	h.t.Helper()
	res := h.result(name, &retry.Failure{Type: "interrupted", Message: "cancelled while running; process group killed"})
	res.Interrupted = true
	return h.record(h.c.AttemptsDone(h.now, []Result{res}))
}

func (h *harness) tick() Ready { return h.record(h.c.Tick(h.now)) }

func fail(typ string) *retry.Failure { return &retry.Failure{Type: typ, Message: typ + " happened"} }

// events of one type from a Ready.
func eventsOf(r Ready, t event.Type) []event.Event {
	var out []event.Event
	for _, e := range r.Events {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

func types(r Ready) []event.Type {
	var out []event.Type
	for _, e := range r.Events {
		out = append(out, e.Type)
	}
	return out
}

func workflow(acts ...*config.Activity) *config.Workflow {
	w := &config.Workflow{Name: "order", Key: "k1", Activities: acts}
	for _, a := range acts {
		a.Workflow = w.Name
	}
	return w
}

// execAct is an exec activity whose command reads the outputs of each of
// deps.
func execAct(name string, rules []retry.Rule, deps ...string) *config.Activity {
	return &config.Activity{Name: name, Kind: config.KindExec, Rules: rules, DependsOn: deps, ResolveDeps: deps, Timeout: 30 * time.Second}
}

func sleepAct(name string, deps ...string) *config.Activity {
	return &config.Activity{Name: name, Kind: config.KindSleep, DependsOn: deps}
}

func expo(initial time.Duration, maxAttempts int) retry.Policy {
	return retry.Policy{Backoff: retry.Exponential, InitialInterval: initial, Coefficient: 2, MaximumInterval: 100 * initial, MaximumAttempts: maxAttempts, Jitter: retry.Jitter{Mode: retry.JitterNone}, HonorRetryAfter: true}
}

const addr = "order/k1"
