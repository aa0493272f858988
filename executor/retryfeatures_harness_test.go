package executor_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

// The harness of the retry-feature tests (retryfeatures_test.go says
// what they run): scripted HTTP servers, the stack wired as `wf apply`
// wires it, and a recorder of its events.

// timingSlack is how late a retry may start relative to its nominal time.
// The tests judge the engine by its own records: the delays and fire
// times it recorded must be exact, and no retry may reach the server
// before its recorded fire time (both hold on any machine). How late it
// is after that depends on the machine: the race detector, other builds
// and fsyncs on two shared cores can hold a step for a second or more, so
// this bound is generous; it only says the retry was neither lost nor
// restarted from scratch. The speed targets live in the benchmarks.
const timingSlack = 5 * time.Second

// runLimit bounds how long a test waits for a run or an event: only a
// hang may exceed it.
const runLimit = 60 * time.Second

// ---- the scripted HTTP server -------------------------------------------

// reply is one scripted response.
type reply struct {
	status     int
	retryAfter string // the Retry-After header, "" for none
}

// hit is one request as the server saw it.
type hit struct {
	at     time.Time
	header http.Header
}

// scriptServer answers each path with its script of replies, one per
// request, repeating the last one, and records every request.
type scriptServer struct {
	*httptest.Server
	mu      sync.Mutex
	scripts map[string][]reply
	hits    map[string][]hit
}

func newScriptServer(t *testing.T, scripts map[string][]reply) *scriptServer {
	t.Helper()
	s := &scriptServer{scripts: scripts, hits: map[string][]hit{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		s.mu.Lock()
		script, ok := s.scripts[r.URL.Path]
		n := len(s.hits[r.URL.Path])
		s.hits[r.URL.Path] = append(s.hits[r.URL.Path], hit{at: at, header: r.Header.Clone()})
		s.mu.Unlock()
		if !ok || len(script) == 0 {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusTeapot)
			return
		}
		rep := script[min(n, len(script)-1)]
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"status":%d,"n":%d}`, rep.status, n+1)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) hitsOf(path string) []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hits[path])
}

// gaps returns the time between consecutive requests.
func gaps(hs []hit) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(hs); i++ {
		out = append(out, hs[i].at.Sub(hs[i-1].at))
	}
	return out
}

// ---- the stack, wired as cmd/wf/apply.go wires it -----------------------

// stack is one configuration directory and its state directory.
type stack struct {
	t        *testing.T
	dir      string
	stateDir string
	vars     []string
}

// newStack writes src as main.wf.hcl into a fresh configuration directory.
// vars are -var NAME=VALUE options.
func newStack(t *testing.T, src string, vars ...string) *stack {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(src), 0o644); err != nil {
		t.Fatalf("write config: %v", err)
	}
	return &stack{t: t, dir: dir, stateDir: filepath.Join(dir, ".wf"), vars: vars}
}

func (s *stack) load() *config.Config {
	s.t.Helper()
	cfg, diags := config.Load(s.dir, config.LoadOptions{Vars: s.vars, Env: []string{}})
	if diags.HasErrors() {
		s.t.Fatalf("load config: %s", diags.Error())
	}
	return cfg
}

// open opens the state store; it is closed at the end of the test unless
// the test closes it first (Close is idempotent).
func (s *stack) open() *statefile.Store {
	s.t.Helper()
	store, err := statefile.Open(s.stateDir, statefile.Options{Command: "retryfeatures test"})
	if err != nil {
		s.t.Fatalf("open state: %v", err)
	}
	s.t.Cleanup(func() { store.Close() })
	return store
}

// started is a run in progress and the events it has published so far.
type started struct {
	run  *executor.Run
	plan *planner.Plan
	rec  *recorder
}

// start plans cfg against store and starts the run, like applyDir and
// execute in cmd/wf/apply.go (minus the views and the signal handling).
func (s *stack) start(cfg *config.Config, store *statefile.Store) *started {
	s.t.Helper()
	plan, diags := planner.Build(cfg, store, planner.Options{Now: time.Now()})
	if diags.HasErrors() || plan == nil {
		s.t.Fatalf("plan: %s", diags.Error())
	}
	bus := event.NewBus()
	rec := newRecorder(bus) // before Start, so that the plan events are seen
	runner := activity.NewRunner(activity.Options{
		BaseEnv: []string{"PATH=" + os.Getenv("PATH")},
		TempDir: s.t.TempDir(),
	})
	run, err := executor.Start(context.Background(), executor.Options{
		Config:    cfg,
		Instances: planInstances(cfg, plan),
		Store:     store,
		Runner:    runner,
		Bus:       bus,
		// A fixed seed: none of these policies use jitter, but a failure
		// must replay the same way.
		Seed: 4,
	})
	if err != nil {
		bus.Close()
		s.t.Fatalf("start run: %v", err)
	}
	return &started{run: run, plan: plan, rec: rec}
}

// wait waits for the run to end (at most limit) and for every event it
// published to be recorded.
func (st *started) wait(t *testing.T, limit time.Duration) executor.Outcome {
	t.Helper()
	select {
	case <-st.run.Done():
	case <-time.After(limit):
		st.run.Cancel()
		<-st.run.Done()
		st.rec.close()
		t.Fatalf("run did not end within %s; events:\n%s", limit, st.rec.dump())
	}
	out, err := st.run.Wait()
	st.rec.close()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return out
}

// apply loads, plans and runs the configuration to its end on a fresh
// store, which stays open for inspection.
func (s *stack) apply(limit time.Duration) (executor.Outcome, *recorder, *statefile.Store) {
	s.t.Helper()
	store := s.open()
	st := s.start(s.load(), store)
	out := st.wait(s.t, limit)
	return out, st.rec, store
}

// planInstances mirrors cmd/wf: unchanged activities are skipped, resumed
// ones carry on from their state, every other action starts afresh.
func planInstances(cfg *config.Config, plan *planner.Plan) []core.Instance {
	byName := make(map[string]*config.Workflow, len(cfg.Workflows))
	for _, wf := range cfg.Workflows {
		byName[wf.Name] = wf
	}
	var out []core.Instance
	for _, ip := range plan.Instances {
		wf := byName[ip.Workflow]
		if wf == nil {
			continue
		}
		modes := make(map[string]core.Mode, len(ip.Activities))
		for _, a := range ip.Activities {
			switch a.Action {
			case planner.ActionUnchanged:
				modes[a.Name] = core.ModeSkip
			case planner.ActionResume:
				modes[a.Name] = core.ModeResume
			default:
				modes[a.Name] = core.ModeFresh
			}
		}
		out = append(out, core.Instance{Workflow: wf, Modes: modes})
	}
	return out
}

// ---- events -------------------------------------------------------------

// recorder keeps every event a bus delivers, in order.
type recorder struct {
	bus  *event.Bus
	mu   sync.Mutex
	evs  []event.Event
	done chan struct{}
}

func newRecorder(bus *event.Bus) *recorder {
	r := &recorder{bus: bus, done: make(chan struct{})}
	sub := bus.Subscribe()
	go func() {
		defer close(r.done)
		for {
			batch, ok := sub.Next(context.Background())
			if !ok {
				return
			}
			r.mu.Lock()
			r.evs = append(r.evs, batch...)
			r.mu.Unlock()
		}
	}()
	return r
}

// close closes the bus and waits until everything queued is recorded.
func (r *recorder) close() {
	r.bus.Close()
	<-r.done
}

func (r *recorder) all() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// of returns the events of one type, for one activity ("activity.NAME")
// or for all when activity is "".
func (r *recorder) of(typ event.Type, activity string) []event.Event {
	var out []event.Event
	for _, ev := range r.all() {
		if ev.Type == typ && (activity == "" || ev.Activity == activity) {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor polls until an event of typ (for any activity when activity is
// "") has been published and returns the first one.
func (r *recorder) waitFor(t *testing.T, typ event.Type, activity string, limit time.Duration) event.Event {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if evs := r.of(typ, activity); len(evs) > 0 {
			return evs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %q within %s; events:\n%s", typ, activity, limit, r.dump())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *recorder) dump() string {
	var s string
	for _, ev := range r.all() {
		s += fmt.Sprintf("  %s %s %s attempt=%d reason=%q", ev.Time.Format("15:04:05.000"), ev.Type, ev.Activity, ev.Attempt, ev.Reason)
		if ev.Error != nil {
			s += fmt.Sprintf(" error=%s", ev.Error.Type)
		}
		if ev.FireAt != nil {
			s += fmt.Sprintf(" fire_at=%s source=%s", ev.FireAt.Format("15:04:05.000"), ev.DelaySource)
		}
		s += "\n"
	}
	return s
}

// activityFailed returns the one activity_failed event of an activity.
func activityFailed(t *testing.T, rec *recorder, name string) event.Event {
	t.Helper()
	evs := rec.of(event.ActivityFailed, "activity."+name)
	if len(evs) != 1 {
		t.Fatalf("activity.%s: %d activity_failed events, want 1; events:\n%s", name, len(evs), rec.dump())
	}
	return evs[0]
}

func attemptsOf(t *testing.T, store *statefile.Store, workflow, key, name string) []*record.Attempt {
	t.Helper()
	atts, err := store.Attempts(workflow, key, name)
	if err != nil {
		t.Fatalf("read attempts of %s: %v", name, err)
	}
	return atts
}

func activityRecord(t *testing.T, store *statefile.Store, workflow, key, name string) *record.Activity {
	t.Helper()
	acts, err := store.Activities(workflow, key)
	if err != nil {
		t.Fatalf("read activities: %v", err)
	}
	a := acts[name]
	if a == nil {
		t.Fatalf("no state for activity %s", name)
	}
	return a
}
