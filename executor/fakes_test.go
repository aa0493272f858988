package executor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeClock moves only when a test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c      *fakeClock
	ch     chan time.Time
	at     time.Time
	active bool
}

func newFakeClock(now time.Time) *fakeClock { return &fakeClock{now: now} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	t.arm(d)
	return t
}

// arm is called with c.mu held.
func (t *fakeTimer) arm(d time.Duration) {
	select {
	case <-t.ch:
	default:
	}
	t.at = t.c.now.Add(d)
	t.active = true
	if d <= 0 {
		t.active = false
		t.ch <- t.c.now
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	select {
	case <-t.ch:
	default:
	}
	return was
}

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.arm(d)
}

// Set moves the clock to now and fires every timer that is due.
func (c *fakeClock) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
	for _, t := range c.timers {
		if t.active && !t.at.After(now) {
			t.active = false
			select {
			case t.ch <- now:
			default:
			}
		}
	}
}

// armed reports whether a timer is armed for exactly at.
func (c *fakeClock) armed(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.active && t.at.Equal(at) {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// memStore is an in-memory Store that records every commit. It
// implements the optional interfaces the executor uses (identity,
// instances, attempts, spawns, activities of many instances) the way
// statefile does.
type memStore struct {
	mu       sync.Mutex
	id       string
	acts     map[string]map[string]*record.Activity
	attempts map[string]*record.Attempt
	budgets  map[string]*record.Budget
	insts    map[string]*record.Instance
	spawns   map[string]map[string]*record.Spawn
	commits  int
	failAt   int // fail the commit with this 1-based number; 0 never
	// failFrom fails every commit from this 1-based number on; 0 never.
	failFrom int
	// failSpawns fails RecordSpawns.
	failSpawns bool
}

func newMemStore() *memStore {
	return &memStore{
		id:       "00112233445566778899aabbccddeeff",
		acts:     map[string]map[string]*record.Activity{},
		attempts: map[string]*record.Attempt{},
		budgets:  map[string]*record.Budget{},
		insts:    map[string]*record.Instance{},
		spawns:   map[string]map[string]*record.Spawn{},
	}
}

func (s *memStore) ID() string { return s.id }

func (s *memStore) Instance(workflow, key string) (*record.Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.insts[workflow+"/"+key]; r != nil {
		cp := *r
		return &cp, nil
	}
	return nil, nil
}

func (s *memStore) Attempts(workflow, key, activity string) ([]*record.Attempt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*record.Attempt
	for _, a := range s.attempts {
		if a.Workflow == workflow && a.Instance == key && a.Activity == activity {
			cp := *a
			out = append(out, &cp)
		}
	}
	return out, nil
}

func (s *memStore) RecordSpawns(sps []*record.Spawn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failSpawns {
		return errDiskFull
	}
	for _, sp := range sps {
		addr := sp.Workflow + "/" + sp.Instance
		if s.spawns[addr] == nil {
			s.spawns[addr] = map[string]*record.Spawn{}
		}
		cp := *sp
		s.spawns[addr][sp.Activity] = &cp
	}
	return nil
}

func (s *memStore) Spawns(workflow, key string) (map[string]*record.Spawn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*record.Spawn{}
	for k, v := range s.spawns[workflow+"/"+key] {
		cp := *v
		out[k] = &cp
	}
	return out, nil
}

func (s *memStore) Activities(workflow, key string) (map[string]*record.Activity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*record.Activity{}
	for k, v := range s.acts[workflow+"/"+key] {
		cp := *v
		out[k] = &cp
	}
	return out, nil
}

// ActivitiesOf reads the instances as statefile does: every key asked
// for is in the result, an empty map for one without activities.
func (s *memStore) ActivitiesOf(workflow string, keys []string) (map[string]map[string]*record.Activity, error) {
	out := map[string]map[string]*record.Activity{}
	for _, k := range keys {
		acts, err := s.Activities(workflow, k)
		if err != nil {
			return nil, err
		}
		out[k] = acts
	}
	return out, nil
}

func (s *memStore) Budgets() (map[string]*record.Budget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*record.Budget{}
	for k, v := range s.budgets {
		cp := *v
		out[k] = &cp
	}
	return out, nil
}

var errDiskFull = errors.New("disk full")

func (s *memStore) Commit(ms []record.Mutation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits++
	if s.commits == s.failAt || s.failFrom > 0 && s.commits >= s.failFrom {
		return errDiskFull
	}
	for _, m := range ms {
		if m.Spawn != nil && s.failSpawns {
			return errDiskFull
		}
	}
	for _, m := range ms {
		switch {
		case m.Spawn != nil:
			sp := *m.Spawn
			addr := sp.Workflow + "/" + sp.Instance
			if s.spawns[addr] == nil {
				s.spawns[addr] = map[string]*record.Spawn{}
			}
			s.spawns[addr][sp.Activity] = &sp
		case m.Activity != nil:
			a := *m.Activity
			addr := a.Workflow + "/" + a.Instance
			if s.acts[addr] == nil {
				s.acts[addr] = map[string]*record.Activity{}
			}
			s.acts[addr][a.Name] = &a
		case m.Attempt != nil:
			a := *m.Attempt
			s.attempts[attemptKey(a.Workflow+"/"+a.Instance, a.Activity, a.Number)] = &a
		case m.Budget != nil:
			b := *m.Budget
			s.budgets[b.Name] = &b
		case m.Instance != nil:
			i := *m.Instance
			s.insts[i.Address()] = &i
		}
	}
	return nil
}

func attemptKey(addr, act string, n int) string {
	return addr + "/" + act + "/" + time.Duration(n).String()
}

func (s *memStore) attempt(addr, act string, n int) *record.Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.attempts[attemptKey(addr, act, n)]; a != nil {
		cp := *a
		return &cp
	}
	return nil
}

func (s *memStore) activity(addr, act string) *record.Activity {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.acts[addr][act]; a != nil {
		cp := *a
		return &cp
	}
	return nil
}

// outcome is what the fake runner does for one attempt.
type outcome struct {
	fail  string // failure type; "" succeeds
	block bool   // wait for ctx to be cancelled, then report interrupted
}

type call struct {
	req activity.Request
	at  time.Time
	// recorded says whether the attempt's start was committed before the
	// runner was called.
	recorded bool
}

// fakeRunner follows a script per activity and logs every call.
type fakeRunner struct {
	mu     sync.Mutex
	clock  Clock
	store  *memStore
	script map[string][]outcome
	calls  []call
}

func (f *fakeRunner) Run(ctx context.Context, req activity.Request) activity.Result {
	start := f.clock.Now()
	f.mu.Lock()
	c := call{req: req, at: start}
	if f.store != nil {
		a := f.store.attempt(req.Workflow+"/"+req.Instance, req.Activity, req.Attempt)
		c.recorded = a != nil && a.Outcome == record.OutcomeRunning
	} else {
		c.recorded = true
	}
	f.calls = append(f.calls, c)
	var o outcome
	if s := f.script[req.Activity]; req.Attempt-1 < len(s) {
		o = s[req.Attempt-1]
	}
	f.mu.Unlock()
	if o.block {
		<-ctx.Done()
		return activity.Result{Start: start, End: f.clock.Now(), Failure: &activity.Failure{Type: "interrupted", Message: "cancelled"}}
	}
	if o.fail != "" {
		return activity.Result{Start: start, End: start, Failure: &activity.Failure{Type: o.fail, Message: "scripted"}}
	}
	return activity.Result{Start: start, End: start, Outputs: []byte(`{"stdout":"ok"}`)}
}

func (f *fakeRunner) callsOf(name string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.req.Activity == name {
			out = append(out, c)
		}
	}
	return out
}

func loadConfig(t testing.TB, src string) *config.Config {
	t.Helper()
	cfg, diags := config.LoadFiles(t.TempDir(), map[string][]byte{"main.wf.hcl": []byte(src)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load config: %s", diags.Error())
	}
	return cfg
}

func instances(cfg *config.Config, modes map[string]core.Mode) []core.Instance {
	var out []core.Instance
	for _, w := range cfg.Workflows {
		out = append(out, core.Instance{Workflow: w, Modes: modes})
	}
	return out
}

// eventLog collects the bus's events in the background.
type eventLog struct {
	mu  sync.Mutex
	evs []event.Event
}

func watch(t *testing.T, bus *event.Bus) *eventLog {
	l := &eventLog{}
	sub := bus.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			batch, ok := sub.Next(ctx)
			if !ok {
				return
			}
			l.mu.Lock()
			l.evs = append(l.evs, batch...)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// find returns the first event of type typ (and activity, when not empty).
func (l *eventLog) find(typ event.Type, activity string, attempt int) (event.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evs {
		if e.Type == typ && (activity == "" || e.Activity == activity) && (attempt == 0 || e.Attempt == attempt) {
			return e, true
		}
	}
	return event.Event{}, false
}

func (l *eventLog) wait(t *testing.T, typ event.Type, activity string, attempt int) event.Event {
	t.Helper()
	var ev event.Event
	waitFor(t, string(typ)+" "+activity, func() bool {
		var ok bool
		ev, ok = l.find(typ, activity, attempt)
		return ok
	})
	return ev
}
