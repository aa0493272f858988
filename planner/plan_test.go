package planner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

var planNow = time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)

// orderConfig is charge (exec) -> ship (http) -> cool (sleep).
func orderConfig() *config.Config {
	charge := act("charge", config.KindExec, 10)
	charge.Rules = []retry.Rule{{Policy: paymentPolicy}}
	ship := act("ship", config.KindHTTP, 20, "charge@22")
	ship.Rules = []retry.Rule{
		{On: []string{"http:429"}, Policy: retry.Policy{Backoff: retry.Fixed, InitialInterval: 5 * time.Second, MaximumAttempts: 20}},
		{Policy: paymentPolicy},
	}
	cool := act("cool", config.KindSleep, 30, "ship@32")
	return &config.Config{Hash: "cfg1", Workflows: []*config.Workflow{workflow("order", "order-1001", charge, ship, cool)}}
}

// succeededState records every activity of cfg as succeeded with the
// hashes the resolver r gives today.
func succeededState(t *testing.T, cfg *config.Config, r fakeResolver) map[string]*record.Activity {
	t.Helper()
	recs := map[string]*record.Activity{}
	wf := cfg.Workflows[0]
	g, _ := BuildGraph(wf)
	for _, name := range g.Order() {
		a := wf.Activity(name)
		recs[name] = &record.Activity{
			Workflow: wf.Name, Instance: wf.Key, Name: name, Generation: 1,
			Status: record.StatusSucceeded, Attempts: 1, Outputs: outputs(map[string]any{"id": name + "-1"}),
		}
		recs[name].DefHash = r.hashFor(t, a, recs)
	}
	return recs
}

type want struct {
	action     Action
	reason     string // substring; "" means the reason must be empty
	generation int
	resume     int
	due        time.Time
}

func TestBuild(t *testing.T) {
	defs := map[string]string{"charge": "v1", "ship": "v1", "cool": "v1"}
	r := fakeResolver{defs: defs}
	tests := []struct {
		name   string
		state  func(t *testing.T, cfg *config.Config) map[string]*record.Activity
		defs   map[string]string // overrides of today's definitions
		opts   Options
		expect map[string]want
	}{
		{
			name:  "empty state runs everything",
			state: func(*testing.T, *config.Config) map[string]*record.Activity { return nil },
			expect: map[string]want{
				"charge": {ActionRun, "", 1, 0, time.Time{}},
				"ship":   {ActionRun, "", 1, 0, time.Time{}},
				"cool":   {ActionRun, "", 1, 0, time.Time{}},
			},
		},
		{
			name:  "all succeeded, nothing changed",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity { return succeededState(t, cfg, r) },
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionUnchanged, "", 1, 0, time.Time{}},
				"cool":   {ActionUnchanged, "", 1, 0, time.Time{}},
			},
		},
		{
			name:  "definition change cascades downstream",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity { return succeededState(t, cfg, r) },
			defs:  map[string]string{"charge": "v2"},
			expect: map[string]want{
				"charge": {ActionRerun, "definition changed", 2, 0, time.Time{}},
				"ship":   {ActionRerun, "upstream activity.charge will run", 2, 0, time.Time{}},
				"cool":   {ActionRerun, "upstream activity.ship will run", 2, 0, time.Time{}},
			},
		},
		{
			name: "a changed upstream result changes the definition",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["charge"].Outputs = outputs(map[string]any{"id": "charge-2"})
				return recs
			},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionRerun, "definition changed", 2, 0, time.Time{}},
				"cool":   {ActionRerun, "upstream activity.ship will run", 2, 0, time.Time{}},
			},
		},
		{
			name:  "replace by activity address",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity { return succeededState(t, cfg, r) },
			opts:  Options{Replace: []string{"activity.ship"}},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionRerun, "replacement requested", 2, 0, time.Time{}},
				"cool":   {ActionRerun, "upstream activity.ship will run", 2, 0, time.Time{}},
			},
		},
		{
			name:  "replace by workflow-qualified address",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity { return succeededState(t, cfg, r) },
			opts:  Options{Replace: []string{"order.activity.cool"}},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionUnchanged, "", 1, 0, time.Time{}},
				"cool":   {ActionRerun, "replacement requested", 2, 0, time.Time{}},
			},
		},
		{
			name: "failed runs again from attempt 1",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["ship"].Status, recs["ship"].Attempts = record.StatusFailed, 5
				recs["ship"].LastError = &record.Error{Type: "http:503"}
				recs["ship"].FailReason = "max_attempts"
				delete(recs, "cool")
				return recs
			},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionRetryFailed, "failed last time: http:503 (max_attempts); runs again from attempt 1", 2, 0, time.Time{}},
				"cool":   {ActionRun, "", 1, 0, time.Time{}},
			},
		},
		{
			name: "pending retry timer resumes",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["ship"].Status, recs["ship"].Attempts = record.StatusWaiting, 2
				recs["ship"].Timer = &record.Timer{Kind: record.TimerRetry, Attempt: 3, FireAt: planNow.Add(4200 * time.Millisecond)}
				recs["cool"].Status, recs["cool"].Generation = record.StatusSkipped, 1
				return recs
			},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionResume, "attempt 3 due in 4s (2025-03-04T12:00:04Z)", 1, 3, planNow.Add(4200 * time.Millisecond)},
				"cool":   {ActionRun, "skipped last time", 2, 0, time.Time{}},
			},
		},
		{
			name: "budget timer already due",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["ship"].Status, recs["ship"].Attempts = record.StatusWaiting, 3
				recs["ship"].Timer = &record.Timer{Kind: record.TimerBudget, Attempt: 4, FireAt: planNow.Add(-time.Minute)}
				return recs
			},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionResume, "attempt 4 waits for the retry budget, due now", 1, 4, planNow.Add(-time.Minute)},
				"cool":   {ActionRerun, "upstream activity.ship will run", 2, 0, time.Time{}},
			},
		},
		{
			name: "interrupted attempt",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["charge"].Status, recs["charge"].Attempts = record.StatusRunning, 2
				delete(recs, "ship")
				delete(recs, "cool")
				return recs
			},
			expect: map[string]want{
				"charge": {ActionResume, "attempt 2 was interrupted", 1, 3, time.Time{}},
				"ship":   {ActionRun, "", 1, 0, time.Time{}},
				"cool":   {ActionRun, "", 1, 0, time.Time{}},
			},
		},
		{
			name: "sleeping",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["cool"].Status, recs["cool"].Attempts = record.StatusWaiting, 1
				recs["cool"].Timer = &record.Timer{Kind: record.TimerSleep, Attempt: 1, FireAt: planNow.Add(10 * time.Minute)}
				return recs
			},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionUnchanged, "", 1, 0, time.Time{}},
				"cool":   {ActionResume, "sleeping until 2025-03-04T12:10:00Z", 1, 1, planNow.Add(10 * time.Minute)},
			},
		},
		{
			name: "pending, not started",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["cool"].Status, recs["cool"].Attempts = record.StatusPending, 0
				return recs
			},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionUnchanged, "", 1, 0, time.Time{}},
				"cool":   {ActionResume, "not started yet", 1, 1, time.Time{}},
			},
		},
		{
			name: "definition changed while waiting",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["ship"].Status, recs["ship"].Attempts = record.StatusWaiting, 1
				recs["ship"].Timer = &record.Timer{Kind: record.TimerRetry, Attempt: 2, FireAt: planNow.Add(time.Second)}
				return recs
			},
			defs: map[string]string{"ship": "v2"},
			expect: map[string]want{
				"charge": {ActionUnchanged, "", 1, 0, time.Time{}},
				"ship":   {ActionRerun, "definition changed while unfinished", 2, 0, time.Time{}},
				"cool":   {ActionRerun, "upstream activity.ship will run", 2, 0, time.Time{}},
			},
		},
		{
			name: "hash not computable while upstream reruns: resume",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				recs := succeededState(t, cfg, r)
				recs["ship"].Status, recs["ship"].Attempts = record.StatusRunning, 1
				return recs
			},
			defs: map[string]string{"charge": "v2", "ship": "v2"},
			expect: map[string]want{
				"charge": {ActionRerun, "definition changed", 2, 0, time.Time{}},
				"ship":   {ActionResume, "attempt 1 was interrupted", 1, 2, time.Time{}},
				"cool":   {ActionRerun, "upstream activity.ship will run", 2, 0, time.Time{}},
			},
		},
		{
			name: "generation 0 record counts as never ran",
			state: func(t *testing.T, cfg *config.Config) map[string]*record.Activity {
				return map[string]*record.Activity{"charge": {Name: "charge", Status: record.StatusSucceeded}}
			},
			expect: map[string]want{
				"charge": {ActionRun, "", 1, 0, time.Time{}},
				"ship":   {ActionRun, "", 1, 0, time.Time{}},
				"cool":   {ActionRun, "", 1, 0, time.Time{}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := orderConfig()
			recs := tt.state(t, cfg)
			today := fakeResolver{defs: map[string]string{}}
			for k, v := range defs {
				today.defs[k] = v
			}
			for k, v := range tt.defs {
				today.defs[k] = v
			}
			st := memState{instances: map[string]map[string]*record.Activity{"order/order-1001": recs}}
			opts := tt.opts
			opts.Now = planNow
			p, diags := build(cfg, st, opts, today.resolve)
			if diags.HasErrors() {
				t.Fatalf("diagnostics: %v", diags)
			}
			if len(p.Instances) != 1 {
				t.Fatalf("%d instances", len(p.Instances))
			}
			ip := p.Instances[0]
			if ip.Workflow != "order" || ip.Key != "order-1001" || p.ConfigHash != "cfg1" || !p.Created.Equal(planNow) {
				t.Errorf("instance %s/%s, config hash %q, created %v", ip.Workflow, ip.Key, p.ConfigHash, p.Created)
			}
			var order []string
			for _, ap := range ip.Activities {
				order = append(order, ap.Name)
				w, ok := tt.expect[ap.Name]
				if !ok {
					t.Errorf("unexpected activity %s", ap.Name)
					continue
				}
				if ap.Action != w.action || ap.Generation != w.generation || ap.ResumeAttempt != w.resume || !ap.DueAt.Equal(w.due) {
					t.Errorf("%s: got %s gen %d resume %d due %v; want %s gen %d resume %d due %v",
						ap.Name, ap.Action, ap.Generation, ap.ResumeAttempt, ap.DueAt, w.action, w.generation, w.resume, w.due)
				}
				if (w.reason == "" && ap.Reason != "") || !strings.Contains(ap.Reason, w.reason) {
					t.Errorf("%s: reason %q, want %q", ap.Name, ap.Reason, w.reason)
				}
			}
			if strings.Join(order, ",") != "charge,ship,cool" {
				t.Errorf("order %v", order)
			}
		})
	}
}

func TestBuildRulePreviews(t *testing.T) {
	cfg := orderConfig()
	p, diags := build(cfg, nil, Options{Now: planNow}, fakeResolver{}.resolve)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ship := p.Instances[0].Activities[1]
	if len(ship.Rules) != 2 || strings.Join(ship.Rules[0].On, ",") != "http:429" || len(ship.Rules[1].On) != 0 {
		t.Fatalf("rules = %+v", ship.Rules)
	}
	if ship.Rules[1].Preview.TotalWait != 15*time.Second || ship.Rules[0].Preview.Attempts != 20 {
		t.Errorf("previews = %+v", ship.Rules)
	}
	if strings.Join(ship.DependsOn, ",") != "charge" || ship.Kind != "http" {
		t.Errorf("ship = %+v", ship)
	}
}

func TestBuildCounts(t *testing.T) {
	p := &Plan{Instances: []InstancePlan{
		{Activities: []ActivityPlan{{Action: ActionRun}, {Action: ActionRetryFailed}, {Action: ActionRerun}, {Action: ActionUnchanged}}},
		{Activities: []ActivityPlan{{Action: ActionResume}, {Action: ActionUnchanged}}},
	}}
	run, rerun, resume, unchanged := p.Counts()
	if run != 2 || rerun != 1 || resume != 1 || unchanged != 2 {
		t.Errorf("Counts = %d %d %d %d", run, rerun, resume, unchanged)
	}
	if !p.HasChanges() {
		t.Error("HasChanges = false")
	}
	quiet := &Plan{Instances: []InstancePlan{{Activities: []ActivityPlan{{Action: ActionUnchanged}}}}}
	if quiet.HasChanges() {
		t.Error("HasChanges = true for an unchanged plan")
	}
}

func TestActionSymbol(t *testing.T) {
	for a, s := range map[Action]string{ActionRun: "+", ActionRerun: "~", ActionResume: ">", ActionRetryFailed: "!", ActionUnchanged: "=", "bogus": "?"} {
		if got := a.Symbol(); got != s {
			t.Errorf("%s.Symbol() = %q, want %q", a, got, s)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	r := fakeResolver{defs: map[string]string{}}
	tests := []struct {
		name    string
		cfg     func() *config.Config
		st      StateReader
		opts    Options
		summary string
		detail  string
	}{
		{"unknown replace address", orderConfig, nil, Options{Replace: []string{"activity.nope"}}, "Replace address matches no activity", "activity.nope"},
		{"replace in another workflow", orderConfig, nil, Options{Replace: []string{"billing.activity.ship"}}, "Replace address matches no activity", "billing.activity.ship"},
		{"malformed replace address", orderConfig, nil, Options{Replace: []string{"ship"}}, "Invalid replace address", `"ship"`},
		{"ambiguous replace address", func() *config.Config {
			cfg := orderConfig()
			cfg.Workflows = append(cfg.Workflows, workflow("billing", "default", act("ship", config.KindExec, 50)))
			return cfg
		}, nil, Options{Replace: []string{"activity.ship"}}, "Ambiguous replace address", "-replace=order.activity.ship or -replace=billing.activity.ship"},
		{"unknown workflow", orderConfig, nil, Options{Workflow: "billing"}, "Unknown workflow", "declared: order"},
		{"state read error", orderConfig, memState{err: errors.New("disk on fire")}, Options{}, "Cannot read state", "read state of order/order-1001: disk on fire"},
		{"cycle", func() *config.Config {
			return &config.Config{Workflows: []*config.Workflow{workflow("order", "k",
				act("a", config.KindExec, 1, "b@2"), act("b", config.KindExec, 3, "a@4"))}}
		}, nil, Options{}, "Dependency cycle: activity.a -> activity.b -> activity.a", ""},
		{"unknown status", orderConfig, memState{instances: map[string]map[string]*record.Activity{
			"order/order-1001": {"charge": {Name: "charge", Generation: 1, Status: "exploded"}}}}, Options{},
			"Unknown activity status in state", `"exploded"`},
		{"corrupt upstream outputs", orderConfig, memState{instances: map[string]map[string]*record.Activity{
			"order/order-1001": {
				"charge": {Name: "charge", Generation: 1, Status: record.StatusSucceeded, DefHash: r.hashFor(t, orderConfig().Workflows[0].Activity("charge"), nil), Outputs: []byte(`[1,2]`)},
				"ship":   {Name: "ship", Generation: 1, Status: record.StatusSucceeded},
			}}}, Options{}, "Cannot decode stored outputs", "want a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Now = planNow
			p, diags := build(tt.cfg(), tt.st, tt.opts, r.resolve)
			if p != nil {
				t.Errorf("plan returned despite errors")
			}
			if !diags.HasErrors() {
				t.Fatalf("no error diagnostics")
			}
			found := false
			for _, d := range diags {
				if d.Severity == hcl.DiagError && d.Summary == tt.summary && strings.Contains(d.Detail, tt.detail) {
					found = true
				}
			}
			if !found {
				t.Errorf("diags = %v, want %q with %q", diags, tt.summary, tt.detail)
			}
		})
	}
}

func TestBuildWorkflowFilter(t *testing.T) {
	cfg := orderConfig()
	cfg.Workflows = append(cfg.Workflows, workflow("billing", "default", act("invoice", config.KindExec, 50)))
	r := fakeResolver{}
	all, diags := build(cfg, nil, Options{Now: planNow}, r.resolve)
	if diags.HasErrors() || len(all.Instances) != 2 {
		t.Fatalf("all: %v, %d instances", diags, len(all.Instances))
	}
	one, diags := build(cfg, nil, Options{Now: planNow, Workflow: "billing", Replace: []string{"activity.invoice"}}, r.resolve)
	if diags.HasErrors() || len(one.Instances) != 1 || one.Instances[0].Address() != "billing/default" {
		t.Fatalf("filtered: %v, %+v", diags, one)
	}
	// activity.ship exists only in order, which is filtered out.
	if _, diags := build(cfg, nil, Options{Now: planNow, Workflow: "billing", Replace: []string{"activity.ship"}}, r.resolve); !diags.HasErrors() {
		t.Error("replace of an activity outside the selected workflow accepted")
	}
}

func TestStateHash(t *testing.T) {
	cfg := orderConfig()
	r := fakeResolver{defs: map[string]string{}}
	recs := succeededState(t, cfg, r)
	hash := func() string {
		st := memState{instances: map[string]map[string]*record.Activity{"order/order-1001": recs}}
		p, diags := build(cfg, st, Options{Now: planNow}, r.resolve)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return p.Instances[0].StateHash
	}
	h1 := hash()
	if h1 != hash() {
		t.Fatal("state hash is not deterministic")
	}
	recs["ship"].Attempts++
	if hash() == h1 {
		t.Error("state hash did not change with the state")
	}
}

// An upstream named by depends_on alone passes no outputs, so its stored
// outputs are not decoded: a fan-out's would cost every element's.
func TestDependsOnAloneDecodesNoOutputs(t *testing.T) {
	r := fakeResolver{defs: map[string]string{}}
	cfg := orderConfig()
	ship := cfg.Workflows[0].Activity("ship")
	ship.ResolveDeps = nil // ship only depends_on charge
	st := memState{instances: map[string]map[string]*record.Activity{
		"order/order-1001": {
			"charge": {Name: "charge", Generation: 1, Status: record.StatusSucceeded, DefHash: r.hashFor(t, cfg.Workflows[0].Activity("charge"), nil), Outputs: []byte(`[1,2]`)},
		}}}
	if _, diags := build(cfg, st, Options{Now: planNow}, r.resolve); diags.HasErrors() {
		t.Fatalf("diags = %v", diags)
	}
}
