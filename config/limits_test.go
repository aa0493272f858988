package config

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/retry"
)

// expLocals is a chain of locals each twice the one before: tiny in memory,
// exponential written out.
func expLocals(n int, use string) string {
	var sb strings.Builder
	sb.WriteString("locals {\n  l0 = [\"x\"]\n")
	for i := 1; i <= n; i++ {
		sb.WriteString("  l" + itoa(i) + " = [local.l" + itoa(i-1) + ", local.l" + itoa(i-1) + "]\n")
	}
	sb.WriteString("  use = " + use + "\n}\n")
	return sb.String()
}

// hangBound is how long a refused input may take before a test calls it
// a hang: far above what the budgets allow even under -race on a loaded
// machine, far below what evaluating the input without them takes.
const hangBound = 5 * time.Minute

func itoa(i int) string { return strconv.Itoa(i) }

func localX(expr string) string { return "locals {\n  x = " + expr + "\n}\n" }

// TestInputLimits: every hostile construct of SPEC §4.3 is a diagnostic
// with the right summary, words and source range, quickly.
func TestInputLimits(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		summary string
		detail  string
		at      string // marker where the subject starts
		line    int    // when the marker is ambiguous: expected line
	}{
		{"nesting", localX(strings.Repeat("(", 80000) + "1" + strings.Repeat(")", 80000)),
			"Too deeply nested", "nested 101 levels deep", "", 2},
		{"nested objects", localX(strings.Repeat("{a=", 5000) + "1" + strings.Repeat("}", 5000)),
			"Too deeply nested", "wf allows 100", "", 2},
		{"nested templates", localX(strings.Repeat(`"${`, 3000) + "1" + strings.Repeat(`}"`, 3000)),
			"Too deeply nested", "templates", "", 2},
		{"nested directives", "locals {\n  x = <<EOT\n" + strings.Repeat("%{ if true }", 200) + "x" + strings.Repeat("%{ endif }", 200) + "\nEOT\n}\n",
			"Too deeply nested", "template directives", "", 3},
		{"nested type", "variable \"v\" {\n  type = " + strings.Repeat("list(", 5000) + "string" + strings.Repeat(")", 5000) + "\n}\n",
			"Too deeply nested", "wf allows 100", "", 2},
		{"unary chain", localX(strings.Repeat("!", 100000) + "true"),
			"Expression too complex", "more than 1000 levels deep", "", 2},
		{"operator chain", localX("1" + strings.Repeat(" + 1", 5000)),
			"Expression too complex", "Split it into local values", "", 2},
		{"conditional chain", localX(strings.Repeat("true ? 1 : ", 2000) + "1"),
			"Expression too complex", "more than 1000 levels deep", "", 2},
		{"huge literal", "variable \"v\" {\n  default = 1e9999999\n}\n",
			"Number out of range", "about 1e9999999 is outside the range wf allows", "1e9999999", 0},
		{"tiny literal", localX("1e-9999999"), "Number out of range", "between 1e-1000 and 1e1000", "1e-9999999", 0},
		{"long literal", localX(strings.Repeat("7", 300)), "Number too long", "300 characters long", "777", 0},
		{"multiplied out of range", "locals {\n  a = 1e999\n  x = \"${local.a * local.a}\"\n}\n",
			"Number out of range", "about 1e1998", "local.a * local.a", 0},
		{"string made a number", localX(`"${"1e9999999" + 0}"`), "Number out of range", "outside the range", `"1e9999999" + 0`, 0},
		{"tonumber", localX(`tonumber("1e9999999")`), "Number out of range", "outside the range", `tonumber(`, 0},
		{"jsondecode number", localX(`jsondecode("1e9999999")`), "Number out of range", "outside the range", "jsondecode(", 0},
		{"typed variable from a string", "variable \"n\" {\n  type    = number\n  default = \"1e9999999\"\n}\n",
			"Number out of range", "outside the range", `"1e9999999"`, 0},
		{"tonumber of a long string", localX(`tonumber("` + strings.Repeat("1", 5000) + `")`), "Number too long", "tonumber: the string is 5000 characters long", "tonumber", 0},
		{"indent", localX(`indent(999999999, "a\nb")`), "Result too large", "In a call to indent: the result of indent would be about 954 MiB", "indent", 0},
		{"format width", localX(`format("%-99999999s", "a")`), "Format width too large", "width or precision of 99999999", "format", 0},
		{"format precision", localX(`format("%.999999f", 1)`), "Format width too large", "999999", "format", 0},
		{"formatlist width", localX(`formatlist("%99999d", [1, 2])`), "Format width too large", "99999", "formatlist", 0},
		{"setproduct", "locals {\n  l = range(1000)\n  x = setproduct(local.l, local.l, local.l)\n}\n",
			"Result too large", "the result of setproduct would be about", "setproduct", 0},
		{"replace", "locals {\n  a = \"" + strings.Repeat("a", 20000) + "\"\n  x = replace(local.a, \"a\", local.a)\n}\n",
			"Result too large", "the result of replace would be about 381 MiB", "replace(", 0},
		{"join", "locals {\n  s = format(\"%-10000s\", \"\")\n  l = [for i in range(1000) : local.s]\n  x = join(local.s, local.l)\n}\n",
			"Result too large", "the result of join", "join(", 0},
		{"regex pattern", localX(`regex("` + strings.Repeat("a", 70000) + `", "a")`), "Pattern too large", "regex: the pattern is 70000 bytes", "regex(", 0},
		{"jsondecode depth", localX(`jsondecode("` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `")`),
			"Value nested too deeply", "the JSON nests more than 100 levels", "jsondecode(", 0},
		{"nested loops", localX("[for i in range(1000) : [for j in range(1000) : [for k in range(1000) : i]]]"),
			"Configuration too expensive to evaluate", "takes more steps than wf allows", "[for k in", 0},
		{"nested loops filtered", localX("[for i in range(1000) : [for j in range(1000) : [for k in range(1000) : i if false]]]"),
			"Configuration too expensive to evaluate", "takes more steps", "range(1000) : i if", 0},
		{"template loops", localX(`"%{ for i in range(1000) }%{ for j in range(1000) }%{ for k in range(1000) }x%{ endfor }%{ endfor }%{ endfor }"`),
			"Configuration too expensive to evaluate", "takes more steps", "range(1000) }x", 0},
		{"repeated large calls", localX("[" + strings.Repeat(`format("%-10000s", "a"), `, 3000) + "]"),
			"Configuration too expensive to evaluate", "wf allows", "", 2},
		{"try does not hide the budget", localX(`try([for i in range(1000) : [for j in range(1000) : [for k in range(1000) : i]]], "cheap")`),
			"Configuration too expensive to evaluate", "takes more steps", "try(", 0},
		{"exponential locals", expLocals(40, "jsonencode(local.l40)"), "Value too large", "larger than the 16 MiB", "[local.l16, local.l16]", 0},
		// Mixed element types: cty unifies them pairwise (one type is
		// built directly, linearly: TestToSetIsLinear).
		{"quadratic conversion", localX("tolist(concat([for i in range(1000) : i], [for i in range(1000) : tostring(i)], [for i in range(1000) : i]))"), "Configuration too expensive to evaluate", "wf allows", "tolist(", 0},
		{"chunklist", "locals {\n  l = range(1000)\n  x = [for i in range(1000) : chunklist(local.l, 1)]\n}\n",
			"Configuration too expensive to evaluate", "wf allows", "", 3},
		{"too many tokens", localX("[" + strings.Repeat("1,", 600000) + "1]"), "File too large", "wf reads at most 400000", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			cfg, diags := load(t, tt.src, LoadOptions{})
			took := time.Since(start)
			errs := errorsOf(diags)
			if len(errs) != 1 {
				var sb strings.Builder
				_ = WriteDiagnostics(&sb, diags, cfg.Sources, false)
				t.Fatalf("want one error, got %d:\n%.3000s", len(errs), sb.String())
			}
			d := errs[0]
			if d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("got %q: %q\nwant %q containing %q", d.Summary, d.Detail, tt.summary, tt.detail)
			}
			if d.Subject == nil || d.Subject.Filename != "cfg/main.wf.hcl" {
				t.Fatalf("subject = %v", d.Subject)
			}
			if tt.at != "" {
				line, col := posOf(t, tt.src, tt.at)
				if d.Subject.Start.Line != line || d.Subject.Start.Column != col {
					t.Errorf("subject starts at %d:%d, want %d:%d", d.Subject.Start.Line, d.Subject.Start.Column, line, col)
				}
			} else if d.Subject.Start.Line != tt.line {
				t.Errorf("subject on line %d, want %d", d.Subject.Start.Line, tt.line)
			}
			// Generous: the steps budget, not the clock, is what limits;
			// this only catches a limit that stopped limiting (a hang).
			// Under -race on a loaded 2-core machine the largest case
			// takes about 90 s, a missing limit hours.
			if took > hangBound {
				t.Errorf("took %v", took)
			}
			var sb strings.Builder
			if err := WriteDiagnostics(&sb, diags, cfg.Sources, false); err != nil {
				t.Fatal(err)
			}
			if sb.Len() > 4000 {
				t.Errorf("diagnostic output is %d bytes; a long line must be shown as a window", sb.Len())
			}
		})
	}
}

// TestLimitsLeaveOrdinaryConfigurationsAlone: what real configurations do
// stays well inside the limits, at load and at run time.
func TestLimitsLeaveOrdinaryConfigurationsAlone(t *testing.T) {
	src := `
variable "n" {
  type    = number
  default = 1e300
}
locals {
  ids     = [for i in range(500) : "id-${i}"]
  by_id   = {for i, id in local.ids : id => i}
  padded  = [for id in local.ids : format("%-20s|", id)]
  uniq    = distinct(concat(local.ids, local.ids))
  csv     = join(",", local.ids)
  nested  = [for i in range(50) : [for j in range(50) : i * j]]
  big     = var.n * 1e600
  tpl     = "%{ for id in slice(local.ids, 0, 3) }${id};%{ endfor }"
}
workflow "w" {
  key = "k-${length(local.uniq)}"
  activity "a" {
    exec { command = ["echo", local.csv, local.tpl, jsonencode(local.nested)] }
  }
  activity "b" {
    exec { command = ["echo", jsonencode([for x in activity.a.result.items : upper(x)])] }
  }
}
`
	cfg := mustLoad(t, src, LoadOptions{})
	w := cfg.Workflows[0]
	if w.Key != "k-500" {
		t.Errorf("key = %q", w.Key)
	}
	if got := cfg.Locals["tpl"].AsString(); got != "id-0;id-1;id-2;" {
		t.Errorf("tpl = %q", got)
	}
	if got := cfg.Locals["padded"].Index(cty.NumberIntVal(1)).AsString(); got != "id-1                |" {
		t.Errorf("padded[1] = %q", got)
	}
	items := make([]string, 2000)
	for i := range items {
		items[i] = "item"
	}
	raw, _ := json.Marshal(map[string]any{"result": map[string]any{"items": items}})
	out, err := OutputsValue(raw)
	if err != nil {
		t.Fatal(err)
	}
	res, diags := w.Activity("b").Resolve(map[string]cty.Value{"a": out})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(res.Exec.Command[1]) != 2000*7+1 {
		t.Errorf("command length %d", len(res.Exec.Command[1]))
	}
}

func TestDistinctKeepsFirstOccurrences(t *testing.T) {
	for src, want := range map[string]string{
		`distinct([3, 1, 2.0, 1, 2, 3.0])`:               `[3,1,2]`,
		`distinct([{a = 1}, {a = 1.0}, {a = 2}])`:        `[{"a":1},{"a":2}]`,
		`distinct([["x"], ["y"], ["x"]])`:                `[["x"],["y"]]`,
		`distinct(["b", "a", "b", "\u00e9", "e\u0301"])`: `["b","a","é"]`,
		`distinct([])`: `[]`,
	} {
		cfg := mustLoad(t, localX(src), LoadOptions{})
		got, err := ctyMarshal(cfg.Locals["x"])
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s = %s, want %s", src, got, want)
		}
	}
	// Large enough that a quadratic distinct would blow the step budget.
	// Letters, not numbers: formatting 12,000 numbers costs cty more CPU
	// than the distinct (seconds under the race detector).
	cfg := mustLoad(t, localX(`distinct(split(",", join(",", [for i in range(60) : join(",", [for j in range(200) : substr("abcdefg", (i * 200 + j) % 7, 1)])])))`), LoadOptions{})
	if n := cfg.Locals["x"].LengthInt(); n != 7 {
		t.Errorf("distinct of 12000 = %d elements, want 7", n)
	}
}

// TestRunTimeLimits: Resolve and retry_if have budgets of their own, and
// upstream outputs that would hang the decoder are refused.
func TestRunTimeLimits(t *testing.T) {
	src := wrap(`
  activity "up" {
    exec { command = ["true"] }
  }
  activity "down" {
    exec { command = ["echo", jsonencode([for a in activity.up.result : [for b in activity.up.result : [for c in activity.up.result : a]]])] }
  }
`)
	cfg := mustLoad(t, src, LoadOptions{})
	list := make([]int, 1000)
	raw, _ := json.Marshal(map[string]any{"result": list})
	out, err := OutputsValue(raw)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, diags := cfg.Workflows[0].Activity("down").Resolve(map[string]cty.Value{"up": out})
	if errs := errorsOf(diags); len(errs) != 1 || errs[0].Summary != "Configuration too expensive to evaluate" {
		t.Fatalf("diags = %v", diags)
	}
	if took := time.Since(start); took > hangBound {
		t.Errorf("took %v", took)
	}
	for name, raw := range map[string]string{
		"deep":   `{"result": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`,
		"number": `{"result": {"n": 1e9999999}}`,
	} {
		if _, err := OutputsValue(json.RawMessage(raw)); err == nil {
			t.Errorf("%s outputs accepted", name)
		}
	}

	cfg = mustLoad(t, `retry_policy "p" {
  maximum_attempts = 3
  retry_if = length([for a in range(attempt * 1000) : [for b in range(attempt * 1000) : [for c in range(attempt * 1000) : a]]]) > 0 || error.type == "x"
}
`, LoadOptions{})
	ok, err := cfg.Policies["p"].Rule.RetryIf(retry.Failure{Type: "x"}, 1, 0)
	if err == nil || ok || !strings.Contains(err.Error(), "wf allows") {
		t.Errorf("retry_if = %v, %v; want a budget error", ok, err)
	}
}
