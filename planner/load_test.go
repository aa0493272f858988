package planner

import (
	"bytes"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/statefile/record"
)

// loadOrder loads testdata/order with the real loader.
func loadOrder(t *testing.T, vars ...string) *config.Config {
	t.Helper()
	cfg, diags := config.Load("testdata/order", config.LoadOptions{Vars: vars})
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	return cfg
}

// TestBuildWithLoader plans the loaded configuration three times: with
// empty state, with state recording success under today's definitions,
// and after a variable change alters the definitions.
func TestBuildWithLoader(t *testing.T) {
	cfg := loadOrder(t)
	p, diags := Build(cfg, nil, Options{Now: planNow})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var buf bytes.Buffer
	if err := Render(&buf, p, false); err != nil {
		t.Fatal(err)
	}
	golden(t, "order_fresh.golden", buf.Bytes())

	// Record every activity as succeeded with the hash the loader gives.
	wf := cfg.Workflows[0]
	recs := map[string]*record.Activity{}
	outs := map[string]string{
		"charge_card": `{"result": {"id": "ch_1"}, "stdout": "{\"id\": \"ch_1\"}", "stderr": "", "exit_code": 0}`,
		"ship":        `{"status": 200, "body": "{}", "headers": {}, "result": {}}`,
		"cool_down":   `{}`,
	}
	for _, ap := range p.Instances[0].Activities {
		a := wf.Activity(ap.Name)
		up := map[string]cty.Value{}
		for _, d := range a.DependsOn {
			v, err := config.OutputsValue(recs[d].Outputs)
			if err != nil {
				t.Fatal(err)
			}
			up[d] = v
		}
		res, diags := a.Resolve(up)
		if diags.HasErrors() {
			t.Fatalf("resolve %s: %v", a.Name, diags)
		}
		recs[a.Name] = &record.Activity{Workflow: wf.Name, Instance: wf.Key, Name: a.Name, Generation: 1,
			Status: record.StatusSucceeded, Attempts: 1, DefHash: res.Hash(), Outputs: []byte(outs[a.Name])}
	}
	st := memState{instances: map[string]map[string]*record.Activity{wf.Address(): recs}}
	p, diags = Build(cfg, st, Options{Now: planNow})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if p.HasChanges() {
		t.Errorf("plan against matching state has changes: %+v", p.Instances[0].Activities)
	}

	// A different stored charge result changes ship's body, so ship re-runs
	// and so does everything after it.
	recs["charge_card"].Outputs = []byte(`{"result": {"id": "ch_2"}}`)
	p, diags = Build(cfg, st, Options{Now: planNow})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := map[string]Action{}
	for _, ap := range p.Instances[0].Activities {
		got[ap.Name] = ap.Action
	}
	if got["charge_card"] != ActionUnchanged || got["ship"] != ActionRerun || got["cool_down"] != ActionRerun {
		t.Errorf("actions after an upstream result changed: %v", got)
	}
}
