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
// its third step names one.
func outputStep(t hcl.Traversal) (string, hcl.Range, bool) {
	if len(t) < 3 {
		return "", hcl.Range{}, false
	}
	switch s := t[2].(type) {
	case hcl.TraverseAttr:
		return s.Name, s.SrcRange, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			return s.Key.AsString(), s.SrcRange, true
		}
	}
	return "", hcl.Range{}, false
}

// checkOutputRef reports a reference to an output the upstream activity's
// kind does not have (kind "" is not checked: its block is broken and was
// reported).
func checkOutputRef(t hcl.Traversal, name string, kind Kind) *hcl.Diagnostic {
	out, rng, ok := outputStep(t)
	if !ok || kind == "" {
		return nil
	}
	outs, known := kindOutputs[kind]
	if !known {
		return nil
	}
	for _, o := range outs {
		if o == out {
			return nil
		}
	}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported attribute", Subject: rng.Ptr()}
	if len(outs) == 0 {
		d.Detail = fmt.Sprintf("activity.%s is a %s activity, which has no outputs. To wait for it without using a value, write depends_on = [activity.%s].", name, kind, name)
		return d
	}
	d.Detail = fmt.Sprintf("activity.%s is an %s activity, which has no output named %q.", name, kind, out)
	if s := suggest(out, outs); s != "" {
		d.Detail += fmt.Sprintf(" Did you mean %q?", s)
	}
	d.Detail += fmt.Sprintf(" Its outputs are %s.", strings.Join(outs, ", "))
	return d
}

// truncatedResultRefs reports every reference in expr to the result of an
// upstream http activity whose response body was cut at its
// max_response_bytes: the head of a body is not the JSON the server sent,
// so there is no result to give, and a null would fail somewhere less
// obvious.
func truncatedResultRefs(expr hcl.Expression, upstream map[string]cty.Value, w *Workflow) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range expr.Variables() {
		if t.RootName() != "activity" {
			continue
		}
		name, named := traversalName(t)
		out, _, ok := outputStep(t)
		if !named || !ok || out != "result" || !bodyTruncated(upstream[name]) {
			continue
		}
		limit := fmt.Sprintf("its max_response_bytes of %d bytes (the default)", DefaultMaxResponseBytes)
		if w != nil {
			if up := w.Activity(name); up != nil && up.maxResponseBytes > 0 {
				limit = fmt.Sprintf("its max_response_bytes of %d bytes", up.maxResponseBytes)
			}
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Result of a truncated response body",
			Detail: fmt.Sprintf("activity.%s.result is not available: the response body of activity %q was longer than %s and was cut there (body_truncated is true), so it was not parsed as JSON. Raise max_response_bytes in the http block of activity %q (at most %d), or use activity.%s.body.",
				name, name, limit, name, MaxMaxResponseBytes, name),
			Subject: t.SourceRange().Ptr(),
		})
	}
	return diags
}

// bodyTruncated reports whether an outputs object says body_truncated.
func bodyTruncated(v cty.Value) bool {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() || !v.Type().IsObjectType() || !v.Type().HasAttribute("body_truncated") {
		return false
	}
	b := v.GetAttr("body_truncated")
	return b.Type() == cty.Bool && b.IsKnown() && !b.IsNull() && b.True()
}

// suggest returns the candidate closest to name when it is close enough to
// be a typo, or "".
func suggest(name string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
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
