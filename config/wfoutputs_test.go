package config

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestWorkflowOutputs(t *testing.T) {
	cfg := mustLoad(t, `
variable "token" {
  default   = "tok-123456"
  sensitive = true
}
`+wrap(`
  activity "fetch" {
    for_each = toset(["a", "b"])
    exec { command = ["echo", each.key] }
  }
  output "all" {
    value       = values(activity.fetch)[*].stdout
    description = "what every fetch printed"
  }
  output "auth" {
    value     = "Bearer ${var.token}"
    sensitive = true
  }
`), LoadOptions{})
	w := cfg.Workflows[0]
	if len(w.Outputs) != 2 || w.Outputs[0].Name != "all" || strings.Join(w.Outputs[0].Deps, ",") != "fetch" || !w.Outputs[0].IsForEach("fetch") {
		t.Fatalf("outputs %+v", w.Outputs)
	}
	el := func(out string) cty.Value {
		v, _ := UpstreamValue(Upstream{Kind: KindExec, Status: StatusSucceeded, Outputs: []byte(`{"stdout":"` + out + `"}`)})
		return v
	}
	got, diags := w.Outputs[0].Eval(map[string]cty.Value{"fetch": ElementsValue(map[string]cty.Value{"a": el("A"), "b": el("B")})})
	if diags.HasErrors() || string(got.Value) != `["A","B"]` || got.Sensitive {
		t.Errorf("all = %s %s %v", got.Value, got.Type, diags)
	}
	auth, diags := w.Outputs[1].Eval(nil)
	if diags.HasErrors() || string(auth.Value) != `"Bearer tok-123456"` || !auth.Sensitive {
		t.Errorf("auth = %s %v %v", auth.Value, auth.Sensitive, diags)
	}
	if _, diags := w.Outputs[0].Eval(nil); !diags.HasErrors() {
		t.Error("an output whose activities have not ended evaluated")
	}

	// A secret in an output not marked sensitive is refused.
	src := "variable \"token\" {\n  default   = \"tok-123456\"\n  sensitive = true\n}\n" + wrap("  output \"auth\" {\n    value = upper(var.token)\n  }\n")
	_, diags = load(t, src, LoadOptions{})
	if errs := errorsOf(diags); len(errs) != 1 || errs[0].Summary != "Output refers to sensitive values" {
		t.Errorf("unmarked sensitive output: %v", diags)
	} else if line, col := posOf(t, src, "upper("); errs[0].Subject.Start.Line != line || errs[0].Subject.Start.Column != col {
		t.Errorf("subject %v", errs[0].Subject)
	}
}
