package config

import "testing"

// TestDidYouMean: every unknown name gets the closest declared one, with
// the diagnostic on the name as written.
func TestDidYouMean(t *testing.T) {
	const decls = `
variable "name" { default = "x" }
locals { greeting = "hi" }
retry_budget "api" {
  max_retries = 3
  window      = "1m"
}
retry_policy "standard" { maximum_attempts = 3 }
`
	act := func(body string) string {
		return decls + wrap("  activity \"fetch\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"use\" {\n"+body+"\n  }\n")
	}
	policy := func(attr string) string {
		return decls + "retry_policy \"p\" {\n  maximum_attempts = 2\n  " + attr + "\n}\n"
	}
	tests := []struct {
		name, src, summary, detail, at string
	}{
		{"variable", act(`    exec { command = ["echo", var.nmae] }`), "Reference to undeclared input variable", `Did you mean "name"?`, "var.nmae"},
		{"local", act(`    exec { command = ["echo", local.greting] }`), "Reference to undeclared local value", `Did you mean "greeting"?`, "local.greting"},
		{"policy", act(`    exec { command = ["true"] }` + "\n    retry = retry_policy.standrad"), "Reference to undeclared retry policy", `Did you mean "standard"?`, "retry_policy.standrad"},
		{"policy in a block", act(`    exec { command = ["true"] }` + "\n    retry {\n      policy = retry_policy.standrad\n    }"), "Reference to undeclared retry policy", `Did you mean "standard"?`, "retry_policy.standrad"},
		{"budget", policy("budget = retry_budget.apj"), "Reference to undeclared retry budget", `Did you mean "api"?`, "retry_budget.apj"},
		{"activity", act(`    exec { command = ["echo", activity.fetc.stdout] }`), "Reference to undeclared activity", `Did you mean "fetch"?`, "activity.fetc"},
		{"activity in depends_on", act(`    exec { command = ["true"] }` + "\n    depends_on = [activity.fetc]"), "Reference to undeclared activity", `Did you mean "fetch"?`, "activity.fetc"},
		{"output", act(`    exec { command = ["echo", activity.fetch.stdot] }`), "Unsupported attribute", `Did you mean "stdout"?`, ".stdot"},
		{"output of all elements (splat)", decls + wrap("  activity \"fetch\" {\n    for_each = toset([\"a\"])\n    exec { command = [\"true\"] }\n  }\n  activity \"use\" {\n    exec { command = concat([\"echo\"], values(activity.fetch)[*].reslt) }\n  }\n"),
			"Unsupported attribute", `no output named "reslt". Did you mean "result"?`, ".reslt"},
		{"output of all elements (for)", decls + wrap("  activity \"fetch\" {\n    for_each = toset([\"a\"])\n    exec { command = [\"true\"] }\n  }\n  output \"o\" {\n    value = { for k, f in activity.fetch : k => f.stdot if f.exit_code == 0 }\n  }\n"),
			"Unsupported attribute", `no output named "stdot". Did you mean "stdout"?`, ".stdot"},
		{"root", act(`    exec { command = ["echo", vra.name] }`), "Unknown reference", `Did you mean "var"?`, "vra.name"},
		{"backoff", policy(`backoff = "expo"`), "Invalid backoff", `got "expo". Did you mean "exponential"?`, `"expo"`},
		{"backoff typo", policy(`backoff = "linaer"`), "Invalid backoff", `Did you mean "linear"?`, `"linaer"`},
		{"jitter", policy(`jitter = "ful"`), "Invalid jitter", `got "ful". Did you mean "full"?`, `"ful"`},
		{"on_exhausted", decls + "retry_budget \"b\" {\n  max_retries = 1\n  window = \"1s\"\n  on_exhausted = \"wiat\"\n}\n", "Invalid on_exhausted", `Did you mean "wait"?`, `"wiat"`},
		{"trigger_rule", act(`    exec { command = ["true"] }` + "\n    trigger_rule = \"any_fail\""), "Invalid trigger_rule", `Did you mean "any_failed"?`, `"any_fail"`},
		{"each attribute", decls + wrap("  activity \"e\" {\n    for_each = toset([\"a\"])\n    exec { command = [\"echo\", each.kye] }\n  }\n"), "Unsupported attribute", `Did you mean "key"?`, "each.kye"},
		{"moved target", decls + wrap("  activity \"fetch\" {\n    exec { command = [\"true\"] }\n  }\n  moved {\n    from = activity.old\n    to   = activity.fecth\n  }\n"), "Moved to an undeclared activity", `Did you mean "fetch"?`, "activity.fecth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt.src, tt.summary, tt.detail, tt.at) })
	}
}

func TestSuggestNames(t *testing.T) {
	cands := []string{"apply", "plan", "validate", "auto-approve", "exponential", "linear", "fixed"}
	for name, want := range map[string]string{
		"aply": "apply", "plna": "plan", "valdate": "validate", "auto-aprove": "auto-approve",
		"expo": "exponential", "lin": "linear", "zzz": "", "x": "", "fixed": "",
	} {
		if got := Suggest(name, cands); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
}
