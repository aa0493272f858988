package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

const varsSrc = `
variable "region" {
  type    = string
  default = "default"
}
variable "count" {
  type    = number
  default = 1
}
variable "tags" {
  type    = list(string)
  default = []
}
variable "any" {
  default = "x"
}
`

func TestVariablePrecedence(t *testing.T) {
	dir := t.TempDir()
	varFile := filepath.Join(dir, "one.wfvars")
	varFile2 := filepath.Join(dir, "two.wfvars")
	if err := os.WriteFile(varFile, []byte("region = \"file1\"\ncount = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(varFile2, []byte("region = \"file2\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		opts   LoadOptions
		auto   string
		region string
		count  int64
	}{
		{name: "defaults", region: "default", count: 1},
		{name: "env", opts: LoadOptions{Env: []string{"WF_VAR_region=env", "WF_VAR_count=7", "OTHER=1"}}, region: "env", count: 7},
		{name: "auto beats env", opts: LoadOptions{Env: []string{"WF_VAR_region=env"}}, auto: "region = \"auto\"\n", region: "auto", count: 1},
		{name: "var-file beats auto", opts: LoadOptions{VarFiles: []string{varFile}}, auto: "region = \"auto\"\ncount = 2\n", region: "file1", count: 3},
		{name: "later var-file wins", opts: LoadOptions{VarFiles: []string{varFile, varFile2}}, region: "file2", count: 3},
		{name: "-var beats var-file", opts: LoadOptions{VarFiles: []string{varFile}, Vars: []string{"region=flag"}}, region: "flag", count: 3},
		{name: "later -var wins", opts: LoadOptions{Vars: []string{"region=a", "region=b", "count=12"}}, region: "b", count: 12},
		{name: "-var value with equals", opts: LoadOptions{Vars: []string{"region=a=b"}}, region: "a=b", count: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var extra []string
			if tt.auto != "" {
				extra = []string{"x.auto.wfvars", tt.auto}
			}
			cfg := mustLoad(t, varsSrc, tt.opts, extra...)
			if got := cfg.Variables["region"].AsString(); got != tt.region {
				t.Errorf("region = %q, want %q", got, tt.region)
			}
			n, _ := cfg.Variables["count"].AsBigFloat().Int64()
			if n != tt.count {
				t.Errorf("count = %d, want %d", n, tt.count)
			}
		})
	}
}

func TestVariableTypes(t *testing.T) {
	cfg := mustLoad(t, varsSrc, LoadOptions{Vars: []string{`tags=["a", "b"]`, "any=[1]", "region=[1]"}})
	if got := cfg.Variables["tags"]; !got.RawEquals(cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})) {
		t.Errorf("tags = %#v", got)
	}
	// Strings and untyped variables are taken literally, as in Terraform.
	if got := cfg.Variables["any"]; !got.RawEquals(cty.StringVal("[1]")) {
		t.Errorf("any = %#v", got)
	}
	if got := cfg.Variables["region"]; !got.RawEquals(cty.StringVal("[1]")) {
		t.Errorf("region = %#v", got)
	}

	tests := []struct {
		name    string
		opts    LoadOptions
		auto    string
		summary string
		detail  string
	}{
		{name: "number from -var", opts: LoadOptions{Vars: []string{"count=abc"}}, summary: "Variables not allowed"},
		{name: "number from env", opts: LoadOptions{Env: []string{`WF_VAR_count="abc"`}}, summary: "Invalid value for variable",
			detail: `The value of variable "count" does not match its type number: a number is required.`},
		{name: "list from file", auto: "tags = \"solo\"\n", summary: "Invalid value for variable",
			detail: `The value of variable "tags" does not match its type list(string): list of string required, but have string.`},
		{name: "syntax error in -var", opts: LoadOptions{Vars: []string{"tags=[1,"}}, summary: "Missing expression"},
		{name: "undeclared -var", opts: LoadOptions{Vars: []string{"nope=1"}}, summary: "Value for undeclared variable",
			detail: `A variable named "nope" was assigned with -var, but it is not declared. Declare it with a variable "nope" block.`},
		{name: "malformed -var", opts: LoadOptions{Vars: []string{"justname"}}, summary: "Invalid -var option",
			detail: `The given -var option "justname" is not correctly specified. It must be NAME=VALUE.`},
		{name: "missing var-file", opts: LoadOptions{VarFiles: []string{"/nonexistent/x.wfvars"}}, summary: "Cannot read variable file"},
		{name: "reference in var file", auto: "region = var.count\n", summary: "Variables not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var extra []string
			if tt.auto != "" {
				extra = []string{"x.auto.wfvars", tt.auto}
			}
			_, diags := load(t, varsSrc, tt.opts, extra...)
			errs := errorsOf(diags)
			if len(errs) == 0 {
				t.Fatalf("want an error, got %v", diags)
			}
			if errs[0].Summary != tt.summary {
				t.Errorf("summary = %q, want %q (%v)", errs[0].Summary, tt.summary, errs)
			}
			if tt.detail != "" && errs[0].Detail != tt.detail {
				t.Errorf("detail = %q, want %q", errs[0].Detail, tt.detail)
			}
		})
	}
}

func TestUndeclaredInFileIsWarning(t *testing.T) {
	cfg, diags := load(t, varsSrc, LoadOptions{Env: []string{"WF_VAR_unused=1"}}, "x.auto.wfvars", "region = \"r\"\n\nzone = \"z\"\n")
	if diags.HasErrors() {
		t.Fatalf("errors: %v", diags)
	}
	ws := warningsOf(diags)
	if len(ws) != 1 || ws[0].Summary != "Value for undeclared variable" {
		t.Fatalf("warnings = %v", ws)
	}
	if s := ws[0].Subject; s.Filename != "cfg/x.auto.wfvars" || s.Start.Line != 3 || s.Start.Column != 1 {
		t.Errorf("subject = %v", s)
	}
	if cfg.Variables["region"].AsString() != "r" {
		t.Errorf("region = %v", cfg.Variables["region"])
	}
}

func TestHashChangesWithVariables(t *testing.T) {
	a := mustLoad(t, varsSrc, LoadOptions{})
	b := mustLoad(t, varsSrc, LoadOptions{})
	c := mustLoad(t, varsSrc, LoadOptions{Vars: []string{"region=other"}})
	d := mustLoad(t, varsSrc+"\n", LoadOptions{})
	if a.Hash == "" || a.Hash != b.Hash {
		t.Errorf("hash not stable: %q vs %q", a.Hash, b.Hash)
	}
	if a.Hash == c.Hash {
		t.Error("hash ignores variable values")
	}
	if a.Hash == d.Hash {
		t.Error("hash ignores file contents")
	}
}

// TestJSONVariableFiles: *.auto.wfvars.json files and -var-file FILE.json
// set variables, literally (no interpolation), in Terraform's order.
func TestJSONVariableFiles(t *testing.T) {
	src := `
variable "a" {}
variable "b" { type = number }
variable "c" { type = list(string) }
variable "d" { default = "d0" }
`
	dir := t.TempDir()
	varFile := dir + "/prod.wfvars.json"
	if err := writeFile(varFile, `{"b": 3, "d": "from -var-file"}`); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, src, LoadOptions{VarFiles: []string{varFile}},
		"x.auto.wfvars.json", `{"a": "${not.interpolated}", "b": 1, "c": ["x", "y"], "d": "from auto"}`,
		"y.auto.wfvars", `b = 2`)
	if got := cfg.Variables["a"].AsString(); got != "${not.interpolated}" {
		t.Errorf("a = %q", got)
	}
	if got, _ := cfg.Variables["b"].AsBigFloat().Int64(); got != 3 {
		t.Errorf("b = %d: -var-file wins over auto files", got)
	}
	if got := cfg.Variables["c"].LengthInt(); got != 2 {
		t.Errorf("c has %d elements", got)
	}
	if got := cfg.Variables["d"].AsString(); got != "from -var-file" {
		t.Errorf("d = %q", got)
	}
	// A broken file is one diagnostic naming it, at the mistake: not one
	// per enclosing level, and not "No value for required variable" for
	// the variables it may have set.
	_, diags := load(t, src, LoadOptions{}, "bad.auto.wfvars.json", `{"a": "x", "c": ["y"`)
	if errs := errorsOf(diags); len(errs) != 1 || errs[0].Subject == nil || !strings.HasSuffix(errs[0].Subject.Filename, "bad.auto.wfvars.json") ||
		errs[0].Subject.Start.Column != 17 {
		t.Errorf("broken JSON: %v", diags)
	}
	_, diags = load(t, src, LoadOptions{}, "bad.auto.wfvars.json", `["a"]`)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "one JSON object") {
		t.Errorf("not an object: %v", diags)
	}
	// An undeclared name is a warning with a suggestion.
	_, diags = load(t, src+`variable "order_id" { default = "1" }`, LoadOptions{}, "v.auto.wfvars.json", `{"a": "x", "b": 1, "c": [], "ordr_id": "2"}`)
	if w := warningsOf(diags); len(w) != 1 || !strings.Contains(w[0].Detail, `Did you mean "order_id"?`) {
		t.Errorf("undeclared: %v", diags)
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

// A conversion that can only keep or drop strings is cost-checked as its
// input (walking a set sorts it); one that can make numbers is checked as
// its result.
func TestStringsOfStrings(t *testing.T) {
	strs := cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.StringVal("a")})
	tests := []struct {
		name    string
		in, out cty.Value
		want    bool
	}{
		{"tuple to set", strs, cty.SetVal([]cty.Value{cty.StringVal("a")}), true},
		{"tuple to list", strs, cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("a")}), true},
		{"to numbers", cty.TupleVal([]cty.Value{cty.StringVal("1e9999999")}), cty.ListVal([]cty.Value{cty.NumberIntVal(1)}), false},
		{"numbers to strings", cty.TupleVal([]cty.Value{cty.NumberIntVal(1)}), cty.SetVal([]cty.Value{cty.StringVal("1")}), false},
		{"unknown element", cty.TupleVal([]cty.Value{cty.UnknownVal(cty.String)}), cty.SetVal([]cty.Value{cty.UnknownVal(cty.String)}), false},
		{"map", cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("a")}), cty.MapVal(map[string]cty.Value{"a": cty.StringVal("a")}), false},
	}
	for _, tt := range tests {
		if got := stringsOfStrings(tt.in, tt.out); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}

}
