package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// kindOutputs lists the outputs each kind of activity has, in the order the
// language reference documents them: activity.NAME.<output>.
var kindOutputs = map[Kind][]string{
	KindExec:  {"result", "stdout", "stderr", "exit_code"},
	KindHTTP:  {"status", "headers", "body", "result", "body_truncated"},
	KindSleep: {},
}

// Outputs returns the names of the outputs of an activity of kind k.
func Outputs(k Kind) []string { return append([]string(nil), kindOutputs[k]...) }

// outputStep returns the output a traversal activity.NAME.OUTPUT names, if
// its step at index i (2, or 3 after an element key) names one.
func outputStep(t hcl.Traversal, i int) (string, hcl.Range, bool) {
	if len(t) <= i {
		return "", hcl.Range{}, false
	}
	switch s := t[i].(type) {
	case hcl.TraverseAttr:
		return s.Name, s.SrcRange, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			return s.Key.AsString(), s.SrcRange, true
		}
	}
	return "", hcl.Range{}, false
}

// upstreamRef describes the activity a reference activity.NAME... names,
// for checkOutputRef.
type upstreamRef struct {
	name string
	kind Kind // "" when its block is broken (reported elsewhere)
	// forEach: the activity has for_each, so activity.NAME is a map of
	// its elements and an output follows an element key.
	forEach bool
	// condition: the reference is in a when expression, where status and
	// error say how the activity ended.
	condition bool
}

// Outputs every activity has besides its kind's, and those only a
// condition (when) sees.
var (
	commonOutputs    = []string{"error"}
	conditionOutputs = []string{"status", "error"}
)

// checkOutputRef reports a reference to an output the upstream activity's
// kind does not have, and an output taken from an activity with for_each
// without naming an element.
func checkOutputRef(t hcl.Traversal, up upstreamRef) *hcl.Diagnostic {
	at := 2
	if up.forEach {
		if len(t) < 3 {
			return nil
		}
		if _, isIndex := t[2].(hcl.TraverseIndex); !isIndex {
			out, rng, _ := outputStep(t, 2)
			return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing element key", Subject: rng.Ptr(),
				Detail: fmt.Sprintf("activity.%s has for_each, so activity.%s is a map of its elements' outputs by key: write activity.%s[KEY].%s for one element, or values(activity.%s)[*].%s for all of them.",
					up.name, up.name, up.name, out, up.name, out)}
		}
		at = 3
	}
	out, rng, ok := outputStep(t, at)
	if !ok || up.kind == "" {
		return nil
	}
	outs, known := kindOutputs[up.kind]
	if !known {
		return nil
	}
	extra := commonOutputs
	if up.condition {
		extra = conditionOutputs
	}
	all := append(append([]string(nil), outs...), extra...)
	for _, o := range all {
		if o == out {
			return nil
		}
	}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported attribute", Subject: rng.Ptr()}
	if out == "status" && !up.condition {
		d.Detail = fmt.Sprintf("activity.%s is %s %s activity, which has no output named \"status\". How an activity ended (succeeded, failed or skipped) is activity.%s.status in a when expression.", up.name, article(up.kind), up.kind, up.name)
		return d
	}
	also := "error says why it failed"
	if up.condition {
		also = "status says how it ended and error why it failed"
	}
	if len(outs) == 0 {
		d.Detail = fmt.Sprintf("activity.%s is a %s activity, which has no outputs (%s).%s To wait for it without using a value, write depends_on = [activity.%s].",
			up.name, up.kind, also, didYouMean(out, all), up.name)
		return d
	}
	d.Detail = fmt.Sprintf("activity.%s is %s %s activity, which has no output named %q.", up.name, article(up.kind), up.kind, out)
	d.Detail += didYouMean(out, all)
	d.Detail += fmt.Sprintf(" Its outputs are %s; %s.", strings.Join(outs, ", "), also)
	return d
}

func article(k Kind) string {
	if k == KindSleep {
		return "a"
	}
	return "an"
}

// truncatedResultRefs reports every reference in expr to the result of an
// upstream http activity (or element) whose response body was cut at its
// max_response_bytes: the head of a body is not the JSON the server sent,
// so there is no result to give, and a null would fail somewhere less
// obvious.
func truncatedResultRefs(refs []hcl.Traversal, upstream map[string]cty.Value, w *Workflow) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range refs {
		name, named := traversalName(t)
		if !named {
			continue
		}
		var up *Activity
		if w != nil {
			up = w.Activity(name)
		}
		val, at, addr := upstream[name], 2, name
		if up != nil && up.ForEach != nil {
			// activity.NAME["KEY"].result: the element's outputs.
			key, ok := indexKey(t, 2)
			if !ok {
				continue
			}
			val, at, addr = elementValue(val, key), 3, ElementName(name, key)
		}
		out, _, ok := outputStep(t, at)
		if !ok || out != "result" || !bodyTruncated(val) {
			continue
		}
		limit := fmt.Sprintf("its max_response_bytes of %d bytes (the default)", DefaultMaxResponseBytes)
		if up != nil && up.maxResponseBytes > 0 {
			limit = fmt.Sprintf("its max_response_bytes of %d bytes", up.maxResponseBytes)
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Result of a truncated response body",
			Detail: fmt.Sprintf("activity.%s.result is not available: the response body of activity.%s was longer than %s and was cut there (body_truncated is true), so it was not parsed as JSON. Raise max_response_bytes in the http block of activity %q (at most %d), or use activity.%s.body.",
				addr, addr, limit, name, MaxMaxResponseBytes, addr),
			Subject: t.SourceRange().Ptr(),
		})
	}
	return diags
}

// resultTraversals returns the references in expr that may name an
// upstream's result (activity.NAME.result, activity.NAME["KEY"].result).
func resultTraversals(expr hcl.Expression) []hcl.Traversal {
	var out []hcl.Traversal
	for _, t := range expr.Variables() {
		if t.RootName() != "activity" {
			continue
		}
		for _, i := range []int{2, 3} {
			if out2, _, ok := outputStep(t, i); ok && out2 == "result" {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// indexKey returns the string key of the index step at i of t.
func indexKey(t hcl.Traversal, i int) (string, bool) {
	if len(t) <= i {
		return "", false
	}
	ix, ok := t[i].(hcl.TraverseIndex)
	if !ok || ix.Key.Type() != cty.String || !ix.Key.IsKnown() || ix.Key.IsNull() {
		return "", false
	}
	return ix.Key.AsString(), true
}

// elementValue returns the element key of an activity-with-for_each
// value (an object of element outputs), or cty.NilVal.
func elementValue(v cty.Value, key string) cty.Value {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() || !v.Type().IsObjectType() || !v.Type().HasAttribute(key) {
		return cty.NilVal
	}
	return v.GetAttr(key)
}

// bodyTruncated reports whether an outputs object says body_truncated.
func bodyTruncated(v cty.Value) bool {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() || !v.Type().IsObjectType() || !v.Type().HasAttribute("body_truncated") {
		return false
	}
	b := v.GetAttr("body_truncated")
	return b.Type() == cty.Bool && b.IsKnown() && !b.IsNull() && b.True()
}

// OutputsValue converts an activity's stored outputs (a JSON object such as
// {"result": ..., "stdout": "...", "exit_code": 0}) into the cty object that
// activity.NAME evaluates to. Values inside may be any JSON; null or empty
// input gives an empty object.
func OutputsValue(raw json.RawMessage) (cty.Value, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return cty.EmptyObjectVal, nil
	}
	if trimmed[0] != '{' {
		return cty.NilVal, fmt.Errorf("decode outputs: want a JSON object, got %.20q", trimmed)
	}
	// The decoder recurses per level of nesting, and a number like
	// 1e9999999 takes minutes to print once it is decoded: both are
	// checked first (the size is whatever the activity was allowed to
	// write).
	if err := checkJSONShape(string(trimmed), math.MaxInt64/2); err != nil {
		return cty.NilVal, fmt.Errorf("decode outputs: %w", err)
	}
	ty, err := ctyjson.ImpliedType(trimmed)
	if err != nil {
		return cty.NilVal, fmt.Errorf("decode outputs: %w", err)
	}
	v, err := ctyjson.Unmarshal(trimmed, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("decode outputs: %w", err)
	}
	if _, _, le := valueCost(v, plainCost, math.MaxInt64/2, math.MaxInt64/2); le != nil {
		return cty.NilVal, fmt.Errorf("decode outputs: %w", le)
	}
	return v, nil
}

func ctyMarshal(v cty.Value) ([]byte, error) {
	return ctyjson.Marshal(v, v.Type())
}
