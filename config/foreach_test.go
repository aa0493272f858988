package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// TestForEachStatic: a map or a set of strings known at load time gives
// one element per key, in key order, named NAME["KEY"], each resolving
// with its own each.key and each.value.
func TestForEachStatic(t *testing.T) {
	cfg := mustLoad(t, wrap(`
  activity "fetch" {
    for_each = { a = "http://127.0.0.1:1/a", "b\"c" = "http://127.0.0.1:1/b" }
    http { url = "${each.value}?k=${each.key}" }
  }
  activity "ping" {
    for_each = toset(["y", "x"])
    exec { command = ["echo", each.key, each.value] }
  }
`), LoadOptions{})
	w := cfg.Workflows[0]
	fetch := w.Activity("fetch")
	els, known, diags := fetch.Elements(nil)
	if diags.HasErrors() || !known || len(els) != 2 {
		t.Fatalf("elements: %v %v %v", els, known, diags)
	}
	if els[0].Name != `fetch["a"]` || els[1].Name != `fetch["b\"c"]` || els[1].Block != "fetch" || els[1].Key != `b"c` || !els[1].IsElement {
		t.Errorf("names: %q %q (%+v)", els[0].Name, els[1].Name, els[1])
	}
	res, diags := els[0].Resolve(nil)
	if diags.HasErrors() || res.HTTP.URL != "http://127.0.0.1:1/a?k=a" {
		t.Errorf("resolve: %v %v", res, diags)
	}
	ping, _, _ := w.Activity("ping").Elements(nil)
	if len(ping) != 2 || ping[0].Key != "x" {
		t.Fatalf("set elements: %v", ping)
	}
	res, _ = ping[0].Resolve(nil)
	if got := strings.Join(res.Exec.Command, " "); got != "echo x x" {
		t.Errorf("set element: %q", got)
	}
	// The element's name finds its activity; splitting it gives it back.
	if w.Activity(`fetch["b\"c"]`) != fetch {
		t.Error("element name does not find its activity")
	}
	if b, k, ok := SplitName(els[1].Name); b != "fetch" || k != `b"c` || !ok {
		t.Errorf("SplitName = %q %q %v", b, k, ok)
	}
	if again, _, _ := fetch.Elements(nil); &again[0] != &els[0] {
		t.Error("static elements are built once")
	}
}

// TestForEachFromUpstream: a collection that uses an upstream result is
// unknown until that result is there, then expanded from it.
func TestForEachFromUpstream(t *testing.T) {
	cfg := mustLoad(t, wrap(`
  activity "list" {
    exec { command = ["./list"] }
  }
  activity "fetch" {
    for_each = toset(activity.list.result.items)
    exec { command = ["echo", each.key] }
  }
  activity "report" {
    exec { command = ["echo", jsonencode(values(activity.fetch)[*].stdout), activity.fetch["a"].stdout] }
  }
`), LoadOptions{})
	w := cfg.Workflows[0]
	fetch := w.Activity("fetch")
	if fetch.ForEach.Known() || strings.Join(fetch.ForEachDeps(), ",") != "list" || strings.Join(fetch.DependsOn, ",") != "list" {
		t.Fatalf("for_each deps %v, depends on %v", fetch.ForEachDeps(), fetch.DependsOn)
	}
	if strings.Join(w.Activity("report").DependsOn, ",") != "fetch" {
		t.Errorf("report depends on %v", w.Activity("report").DependsOn)
	}
	if _, known, _ := fetch.Elements(nil); known {
		t.Error("known before list ran")
	}
	list, err := UpstreamValue(Upstream{Kind: KindExec, Status: StatusSucceeded, Outputs: []byte(`{"result":{"items":["b","a","b"]},"stdout":"","exit_code":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	els, known, diags := fetch.Elements(map[string]cty.Value{"list": list})
	if !known || diags.HasErrors() || len(els) != 2 || els[0].Name != `fetch["a"]` {
		t.Fatalf("elements %v %v %v", els, known, diags)
	}
	// Downstream sees activity.fetch as a map of the elements.
	el := func(out string) cty.Value {
		v, err := UpstreamValue(Upstream{Kind: KindExec, Status: StatusSucceeded, Outputs: []byte(`{"stdout":"` + out + `","exit_code":0}`)})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	res, diags := w.Activity("report").Resolve(map[string]cty.Value{"fetch": ElementsValue(map[string]cty.Value{"a": el("A"), "b": el("B")})})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := strings.Join(res.Exec.Command, " "); got != `echo ["A","B"] A` {
		t.Errorf("report: %q", got)
	}

	// A list from upstream is refused at run time with the hint.
	cfg = mustLoad(t, wrap(`
  activity "list" {
    exec { command = ["./list"] }
  }
  activity "fetch" {
    for_each = activity.list.result
    exec { command = ["echo", each.key] }
  }
`), LoadOptions{})
	list, _ = UpstreamValue(Upstream{Kind: KindExec, Status: StatusSucceeded, Outputs: []byte(`{"result":["a"]}`)})
	_, _, diags = cfg.Workflows[0].Activity("fetch").Elements(map[string]cty.Value{"list": list})
	if !diags.HasErrors() || !strings.Contains(diags[0].Detail, "toset(") {
		t.Errorf("list from upstream: %v", diags)
	}
}

// TestForEachErrors: what for_each refuses, each with its range.
func TestForEachErrors(t *testing.T) {
	act := func(attrs, cmd string) string {
		return "variable \"tok\" {\n  default   = \"s3cr3t-value\"\n  sensitive = true\n}\n" + wrap("  activity \"list\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"a\" {\n    "+attrs+"\n    exec { command = "+cmd+" }\n  }\n")
	}
	tests := []struct {
		name, src, summary, detail, at string
	}{
		{"list", act(`for_each = ["x", "y"]`, `["true"]`), "Invalid for_each argument", "this is a tuple with 2 elements. A list has no keys to address its elements by: convert it with toset(...)", `["x", "y"]`},
		{"typed list", act(`for_each = tolist(["x"])`, `["true"]`), "Invalid for_each argument", "convert it with toset(...)", `tolist(["x"])`},
		{"list of unknowns", act(`for_each = [activity.list.result]`, `["true"]`), "Invalid for_each argument", "toset(...)", `[activity.list.result]`},
		{"set of numbers", act(`for_each = toset([1, 2])`, `["true"]`), "Invalid for_each argument", "set of number", `toset([1, 2])`},
		{"null", act(`for_each = null`, `["true"]`), "Invalid for_each argument", "must not be null", `null`},
		{"string", act(`for_each = "x"`, `["true"]`), "Invalid for_each argument", "this is a string", `"x"`},
		{"sensitive", act(`for_each = toset([var.tok])`, `["true"]`), "Invalid for_each argument", "sensitive", `toset([var.tok])`},
		{"each without for_each", act(``, `["echo", each.key]`), "Invalid reference", "only available in the kind block and the when expression of an activity with for_each", `each.key`},
		{"each in for_each", act(`for_each = toset([each.key])`, `["true"]`), "Invalid reference", "each.key and each.value are only available", `each.key]`},
		{"each in timeout", act("for_each = toset([\"x\"])\n    timeout = each.value", `["true"]`), "Invalid reference", "each.key and each.value are only available", `each.value`},
		{"output of the whole map", wrap("  activity \"m\" {\n    for_each = toset([\"x\"])\n    exec { command = [\"true\"] }\n  }\n  activity \"u\" {\n    exec { command = [\"echo\", activity.m.stdout] }\n  }\n"),
			"Missing element key", `activity.m has for_each, so activity.m is a map of its elements' outputs by key: write activity.m[KEY].stdout for one element, or values(activity.m)[*].stdout for all of them.`, ".stdout"},
		{"element output typo", wrap("  activity \"m\" {\n    for_each = toset([\"x\"])\n    exec { command = [\"true\"] }\n  }\n  activity \"u\" {\n    exec { command = [\"echo\", activity.m[\"x\"].stdot] }\n  }\n"),
			"Unsupported attribute", `Did you mean "stdout"?`, ".stdot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt.src, tt.summary, tt.detail, tt.at) })
	}
}

func TestAddresses(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Address
		err  bool
	}{
		{in: "activity.fetch", want: Address{Name: "fetch"}},
		{in: `activity.fetch["a b"]`, want: Address{Name: "fetch", Key: "a b", HasKey: true}},
		{in: `activity.fetch["q\"\\$${x}"]`, want: Address{Name: "fetch", Key: `q"\${x}`, HasKey: true}},
		{in: "fetch", err: true},
		{in: "activity.fetch[0]", err: true},
		{in: "activity.fetch.result", err: true},
		{in: "activity.", err: true},
	} {
		got, err := ParseAddress(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseAddress(%q) = %+v, %v", tt.in, got, err)
			continue
		}
		if !tt.err {
			// Addresses print in the form they parse from.
			again, err := ParseAddress(got.String())
			if err != nil || again != got {
				t.Errorf("round trip of %q: %q -> %+v %v", tt.in, got.String(), again, err)
			}
		}
	}
	for _, key := range []string{"a", "", "x\ny", `"`, `\`, "${x}", "%{if}", "é", "\x01"} {
		name := ElementName("f", key)
		b, k, ok := SplitName(name)
		if b != "f" || k != key || !ok {
			t.Errorf("SplitName(%q) = %q %q %v, want key %q", name, b, k, ok, key)
		}
	}
}

// TestToSetIsLinear: toset and tolist of a tuple of one element type are
// built directly (cty's conversion is quadratic: 1.8 s for 10,000
// strings) with the same result; mixed tuples still convert as cty does.
func TestToSetIsLinear(t *testing.T) {
	funcs := baseFunctions()
	vals := make([]cty.Value, 20000)
	for i := range vals {
		vals[i] = cty.StringVal(fmt.Sprintf("k%05d", i))
	}
	start := time.Now()
	set, err := funcs["toset"].Call([]cty.Value{cty.TupleVal(vals)})
	if err != nil || !set.Type().Equals(cty.Set(cty.String)) || set.LengthInt() != 20000 {
		t.Fatalf("toset: %v %v", set.Type().FriendlyName(), err)
	}
	// cty's quadratic conversion takes about 7 s for 20,000 strings, far
	// more under -race; the direct build takes milliseconds. The bound is generous
	// so that a loaded machine never fails it (speed lives in benchmarks).
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("toset of 20,000 strings took %s", d)
	}
	list, err := funcs["tolist"].Call([]cty.Value{cty.TupleVal(vals[:3])})
	if err != nil || !list.RawEquals(cty.ListVal(vals[:3])) {
		t.Errorf("tolist: %#v %v", list, err)
	}
	// Mixed element types: cty's conversion (number to string).
	mixed, err := funcs["toset"].Call([]cty.Value{cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(1)})})
	if err != nil || !mixed.Type().Equals(cty.Set(cty.String)) || mixed.LengthInt() != 2 {
		t.Errorf("mixed: %#v %v", mixed, err)
	}
	// A null element: cty's answer, whatever it is.
	withNull := cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NullVal(cty.String)})
	want, wantErr := stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)).Call([]cty.Value{withNull})
	got, gotErr := funcs["toset"].Call([]cty.Value{withNull})
	if (wantErr == nil) != (gotErr == nil) || (wantErr == nil && !got.RawEquals(want)) {
		t.Errorf("null element: %#v %v, want %#v %v", got, gotErr, want, wantErr)
	}
	// The load budget lets a 10,000-element for_each through.
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("%q", fmt.Sprintf("k%05d", i))
	}
	cfg := mustLoad(t, wrap("  activity \"a\" {\n    for_each = toset(["+strings.Join(keys, ", ")+"])\n    exec { command = [\"true\", each.key] }\n  }\n"), LoadOptions{})
	if els, _, _ := cfg.Workflows[0].Activity("a").Elements(nil); len(els) != 10000 {
		t.Errorf("%d elements", len(els))
	}
}

// A for_each too expensive to evaluate is an error, not an activity
// quietly without for_each (toset's fast path used to drop the budget's
// diagnostic and evaluate again, which then gave an unknown).
func TestForEachOverBudget(t *testing.T) {
	src := wrap("  activity \"a\" {\n    for_each = toset(flatten([for a in range(1000) : [for b in range(1000) : format(\"k%d-%d\", a, b)]]))\n    exec { command = [\"true\", each.key] }\n  }\n")
	_, diags := load(t, src, LoadOptions{})
	errs := errorsOf(diags)
	if len(errs) != 1 || errs[0].Summary != "Configuration too expensive to evaluate" {
		t.Fatalf("want one budget error, got %v", diags)
	}
}
