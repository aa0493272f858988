package planner

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

func rng(line int) hcl.Range {
	return hcl.Range{
		Filename: "main.wf.hcl",
		Start:    hcl.Pos{Line: line, Column: 5, Byte: line * 10},
		End:      hcl.Pos{Line: line, Column: 20, Byte: line*10 + 15},
	}
}

// act builds an activity whose kind block reads the outputs of each of
// deps; deps are "name@line" pairs or plain names (line 0).
func act(name string, kind config.Kind, line int, deps ...string) *config.Activity {
	a := &config.Activity{Name: name, Workflow: "order", Kind: kind, DeclRange: rng(line)}
	ranges := map[string]hcl.Range{}
	for _, d := range deps {
		dep, at, found := strings.Cut(d, "@")
		a.DependsOn = append(a.DependsOn, dep)
		a.ResolveDeps = append(a.ResolveDeps, dep)
		ranges[dep] = a.DeclRange
		if found {
			line, err := strconv.Atoi(at)
			if err != nil {
				panic(err)
			}
			ranges[dep] = rng(line)
		}
	}
	sort.Strings(a.DependsOn)
	for _, dep := range a.DependsOn {
		a.DependsOnRanges = append(a.DependsOnRanges, ranges[dep])
	}
	return a
}

func workflow(name, key string, acts ...*config.Activity) *config.Workflow {
	for _, a := range acts {
		a.Workflow = name
	}
	return &config.Workflow{Name: name, Key: key, Activities: acts, DeclRange: rng(1)}
}

// fakeResolver stands in for the loader's resolver: an activity's
// definition is defs[name] plus the `result` of every upstream output, so
// tests can change a definition or an upstream result independently.
type fakeResolver struct {
	defs map[string]string
}

func (f fakeResolver) resolve(a *config.Activity, upstream map[string]cty.Value) (*config.Resolved, hcl.Diagnostics) {
	env := map[string]string{}
	for _, up := range a.DependsOn {
		v, ok := upstream[up]
		if !ok {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unknown upstream outputs", Detail: "activity." + up, Subject: a.DeclRange.Ptr()}}
		}
		res := cty.NullVal(cty.DynamicPseudoType)
		if v.Type().IsObjectType() && v.Type().HasAttribute("result") {
			res = v.GetAttr("result")
		}
		b, err := ctyjson.Marshal(res, cty.DynamicPseudoType)
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "marshal", Detail: err.Error()}}
		}
		env[up] = string(b)
	}
	return &config.Resolved{Exec: &config.ExecSpec{Command: []string{a.Name, f.defs[a.Name]}, Env: env, Dir: "/cfg"}}, nil
}

// hashFor is the DefHash the fake resolver gives a with the outputs in recs.
func (f fakeResolver) hashFor(t *testing.T, a *config.Activity, recs map[string]*record.Activity) string {
	t.Helper()
	up := map[string]cty.Value{}
	for _, d := range a.DependsOn {
		v, err := config.OutputsValue(recs[d].Outputs)
		if err != nil {
			t.Fatal(err)
		}
		up[d] = v
	}
	r, diags := f.resolve(a, up)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return r.Hash()
}

func outputs(result any) json.RawMessage {
	b, err := json.Marshal(map[string]any{"result": result, "stdout": "", "exit_code": 0})
	if err != nil {
		panic(err)
	}
	return b
}

// memState is an in-memory StateReader.
type memState struct {
	instances map[string]map[string]*record.Activity
	err       error
}

func (m memState) Activities(workflow, key string) (map[string]*record.Activity, error) {
	if m.err != nil {
		return nil, m.err
	}
	if recs, ok := m.instances[workflow+"/"+key]; ok {
		return recs, nil
	}
	return map[string]*record.Activity{}, nil
}

var paymentPolicy = retry.Policy{Backoff: retry.Exponential, InitialInterval: 1e9, Coefficient: 2, MaximumInterval: 8e9, MaximumAttempts: 5}
