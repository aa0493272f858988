package planner

import (
	"encoding/json"
	"sort"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/statefile/record"
)

// OutputResult is one workflow output evaluated against an instance's
// records (wf output, the end of wf apply).
type OutputResult struct {
	Name        string
	Description string
	// Known is set when everything the output refers to has ended; Value
	// and Type (JSON) are then set, unless Error says why it could not be
	// evaluated.
	Known bool
	Value json.RawMessage
	Type  json.RawMessage
	Error string
	// Sensitive: shown as (sensitive) to humans.
	Sensitive bool
	// Waiting lists the activities (activity.NAME) that have not ended.
	Waiting []string
}

// Outputs evaluates the workflow's outputs from the stored records of
// one of its instances, in declaration order. An output is known once
// every activity it refers to has ended; an activity with for_each has
// ended when each of its elements has (those of its keys when they are
// known now, else those in state).
func Outputs(wf *config.Workflow, records map[string]*record.Activity) []OutputResult {
	var out []OutputResult
	cache := map[string]cty.Value{}
	for _, o := range wf.Outputs {
		res := OutputResult{Name: o.Name, Description: o.Description, Sensitive: o.Sensitive}
		vals := map[string]cty.Value{}
		for _, dep := range o.Deps {
			v, ended := depValue(wf, dep, records, cache)
			if !ended {
				res.Waiting = append(res.Waiting, "activity."+dep)
				continue
			}
			vals[dep] = v
		}
		if len(res.Waiting) == 0 {
			res.Known = true
			v, diags := o.Eval(vals)
			if diags.HasErrors() {
				res.Error = diagsText(diags)
			} else {
				res.Value, res.Type, res.Sensitive = v.Value, v.Type, v.Sensitive
			}
		}
		out = append(out, res)
	}
	return out
}

func depValue(wf *config.Workflow, dep string, records map[string]*record.Activity, cache map[string]cty.Value) (cty.Value, bool) {
	if v, ok := cache[dep]; ok {
		return v, v != cty.NilVal
	}
	v := cty.NilVal
	defer func() { cache[dep] = v }()
	a := wf.Activity(dep)
	if a == nil {
		return v, false
	}
	ended := func(r *record.Activity) bool {
		return r != nil && (r.Status == record.StatusSucceeded || r.Status == record.StatusFailed || r.Status == record.StatusSkipped)
	}
	value := func(r *record.Activity) (cty.Value, bool) {
		up := config.Upstream{Kind: a.Kind, Status: statusWord(r.Status), Outputs: r.Outputs}
		if e := r.LastError; e != nil && r.Status == record.StatusFailed {
			up.ErrorType, up.ErrorMessage, up.HasError = e.Type, e.Message, true
		}
		uv, err := config.UpstreamValue(up)
		return uv, err == nil
	}
	if a.ForEach == nil {
		r := records[dep]
		if !ended(r) {
			return v, false
		}
		uv, ok := value(r)
		if ok {
			v = uv
		}
		return v, ok
	}
	var names []string
	if keys := a.StaticKeys(); a.ForEach.Known() {
		for _, k := range keys {
			names = append(names, config.ElementName(dep, k))
		}
	} else {
		for name := range records {
			if b, _, ok := config.SplitName(name); ok && b == dep {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			return v, false
		}
	}
	m := make(map[string]cty.Value, len(names))
	for _, name := range names {
		r := records[name]
		if !ended(r) {
			return v, false
		}
		uv, ok := value(r)
		if !ok {
			return v, false
		}
		_, key, _ := config.SplitName(name)
		m[key] = uv
	}
	v = config.ElementsValue(m)
	return v, true
}

func diagsText(diags interface{ Error() string }) string { return diags.Error() }
