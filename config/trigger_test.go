package config

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestTriggerRuleAndWhen: trigger_rule is decoded, when is a dependency
// and sees each upstream's status and error.
func TestTriggerRuleAndWhen(t *testing.T) {
	cfg := mustLoad(t, wrap(`
  activity "ship" {
    http { url = "http://127.0.0.1:1/ship" }
  }
  activity "charge" {
    exec { command = ["true"] }
  }
  activity "refund" {
    trigger_rule = "any_failed"
    when         = activity.ship.status == "failed" && activity.ship.error.type != "http:404"
    exec { command = ["echo", activity.charge.stdout, try(activity.ship.error.message, "")] }
  }
`), LoadOptions{})
	w := cfg.Workflows[0]
	refund := w.Activity("refund")
	if refund.TriggerRule != TriggerAnyFailed || !refund.TriggerRule.Handles() || w.Activity("ship").TriggerRule != TriggerAllSucceeded {
		t.Errorf("trigger rules %q %q", refund.TriggerRule, w.Activity("ship").TriggerRule)
	}
	if got := strings.Join(refund.DependsOn, ","); got != "charge,ship" {
		t.Errorf("depends on %s", got)
	}
	cond := func(u Upstream) cty.Value {
		v, err := ConditionValue(u)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tt := range []struct {
		ship Upstream
		want bool
	}{
		{Upstream{Kind: KindHTTP, Status: StatusFailed, ErrorType: "http:503", ErrorMessage: "down", HasError: true}, true},
		{Upstream{Kind: KindHTTP, Status: StatusFailed, ErrorType: "http:404", HasError: true}, false},
		{Upstream{Kind: KindHTTP, Status: StatusSucceeded, Outputs: []byte(`{"status":200,"body":""}`)}, false},
		{Upstream{Kind: KindHTTP, Status: StatusSkipped}, false},
	} {
		got, diags := refund.Condition(map[string]cty.Value{"ship": cond(tt.ship)})
		if diags.HasErrors() || got != tt.want {
			t.Errorf("when with ship %+v = %v %v, want %v", tt.ship, got, diags, tt.want)
		}
	}
	// A failed upstream's outputs are null in the kind block; error is set.
	ship, _ := UpstreamValue(Upstream{Kind: KindHTTP, Status: StatusFailed, ErrorType: "http:503", ErrorMessage: "down", HasError: true})
	charge, _ := UpstreamValue(Upstream{Kind: KindExec, Status: StatusSucceeded, Outputs: []byte(`{"stdout":"ch_1"}`)})
	res, diags := refund.Resolve(map[string]cty.Value{"ship": ship, "charge": charge})
	if diags.HasErrors() || strings.Join(res.Exec.Command, " ") != "echo ch_1 down" {
		t.Errorf("resolve: %v %v", res, diags)
	}
}

func TestWhenErrors(t *testing.T) {
	tests := []struct {
		name, src, summary, detail, at string
	}{
		{"not a bool", wrap("  activity \"a\" {\n    when = \"yes\"\n    exec { command = [\"true\"] }\n  }\n"), "Invalid when", "bool expression, but this one is a string", `"yes"`},
		{"status outside when", wrap("  activity \"u\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"a\" {\n    exec { command = [\"echo\", activity.u.status] }\n  }\n"),
			"Unsupported attribute", "How an activity ended (succeeded, failed or skipped) is activity.u.status in a when expression.", ".status"},
		{"status typo in when", wrap("  activity \"u\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"a\" {\n    when = activity.u.stauts == \"failed\"\n    exec { command = [\"true\"] }\n  }\n"),
			"Unsupported attribute", `Did you mean "status"?`, ".stauts"},
		{"self", wrap("  activity \"a\" {\n    when = activity.a.status == \"failed\"\n    exec { command = [\"true\"] }\n  }\n"), "Self-referential activity", "cannot refer to its own outputs", "activity.a.status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt.src, tt.summary, tt.detail, tt.at) })
	}
}
