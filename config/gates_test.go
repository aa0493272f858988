package config

import (
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/retry"
)

func TestBreakerBlock(t *testing.T) {
	src := `
circuit_breaker "api" {
  failure_ratio   = 0.25
  minimum_calls   = 4
  window          = "1m"
  break_duration  = "10s"
  half_open_calls = 2
  failures        = ["http:5*", "timeout"]
}
circuit_breaker "defaults" {}
retry_policy "p" {
  maximum_attempts = 3
  circuit_breaker  = circuit_breaker.api
}
workflow "w" {
  activity "a" {
    exec { command = ["true"] }
    retry = retry_policy.p
  }
  activity "b" {
    exec { command = ["true"] }
    retry {
      policy  = retry_policy.p
      on_open = "fail"
    }
  }
  activity "c" {
    exec { command = ["true"] }
    retry {
      maximum_attempts = 2
      circuit_breaker  = circuit_breaker.defaults
    }
  }
}
`
	cfg := mustLoad(t, src, LoadOptions{})
	api := cfg.Breakers["api"].Breaker
	want := retry.Breaker{Name: "api", FailureRatio: 0.25, MinimumCalls: 4, Window: time.Minute, BreakDuration: 10 * time.Second, HalfOpenCalls: 2, Failures: []string{"http:5*", "timeout"}}
	if api.Name != want.Name || api.FailureRatio != want.FailureRatio || api.MinimumCalls != want.MinimumCalls || api.Window != want.Window ||
		api.BreakDuration != want.BreakDuration || api.HalfOpenCalls != want.HalfOpenCalls || strings.Join(api.Failures, ",") != "http:5*,timeout" {
		t.Errorf("api = %+v, want %+v", api, want)
	}
	def := cfg.Breakers["defaults"].Breaker
	if def.FailureRatio != 0.5 || def.MinimumCalls != 10 || def.Window != 30*time.Second || def.BreakDuration != 30*time.Second || def.HalfOpenCalls != 1 || def.Failures != nil {
		t.Errorf("defaults = %+v", def)
	}
	wf := cfg.Workflows[0]
	for _, tc := range []struct{ act, breaker, onOpen string }{
		{"a", "api", "wait"}, {"b", "api", "fail"}, {"c", "defaults", "wait"},
	} {
		p := wf.Activity(tc.act).Rules[0].Policy
		if p.CircuitBreaker != tc.breaker || p.OnOpen != tc.onOpen {
			t.Errorf("activity %s: breaker %q on_open %q, want %q %q", tc.act, p.CircuitBreaker, p.OnOpen, tc.breaker, tc.onOpen)
		}
	}
}

func TestBudgetParents(t *testing.T) {
	cfg := mustLoad(t, `
retry_budget "team" {
  max_retries = 5
  window      = "1m"
  parent      = retry_budget.org
}
retry_budget "org" {
  max_retries = 20
  window      = "1m"
}
`, LoadOptions{})
	if p := cfg.Budgets["team"].Parent; p != "org" {
		t.Errorf("team's parent = %q", p)
	}
	if p := cfg.Budgets["org"].Parent; p != "" {
		t.Errorf("org's parent = %q", p)
	}
}

func TestHeartbeatTimeout(t *testing.T) {
	cfg := mustLoad(t, wrap(`activity "a" {
  exec { command = ["true"] }
  heartbeat_timeout = "30s"
}`), LoadOptions{})
	if got := cfg.Workflows[0].Activity("a").HeartbeatTimeout; got != 30*time.Second {
		t.Errorf("heartbeat_timeout = %s", got)
	}
}

func TestGateValidationErrors(t *testing.T) {
	budget := func(name, parent string) string {
		return "retry_budget \"" + name + "\" {\n  max_retries = 1\n  window = \"1m\"\n  parent = retry_budget." + parent + "\n}\n"
	}
	tests := []struct {
		name    string
		src     string
		summary string
		detail  string
		at      string
		warning bool
	}{
		{
			name:    "failure_ratio out of range",
			src:     "circuit_breaker \"b\" {\n  failure_ratio = 1.5\n}\n",
			summary: "Invalid failure_ratio",
			detail:  "at most 1",
			at:      "1.5",
		},
		{
			name:    "zero minimum_calls",
			src:     "circuit_breaker \"b\" {\n  minimum_calls = 0\n}\n",
			summary: "Invalid minimum_calls",
			detail:  "at least 1",
			at:      "0\n",
		},
		{
			name:    "zero break_duration",
			src:     "circuit_breaker \"b\" {\n  break_duration = \"0s\"\n}\n",
			summary: "Invalid break_duration",
			detail:  "longer than zero",
			at:      `"0s"`,
		},
		{
			name:    "bad window",
			src:     "circuit_breaker \"b\" {\n  window = \"soon\"\n}\n",
			summary: "Invalid duration",
			at:      `"soon"`,
		},
		{
			name:    "unknown breaker attribute",
			src:     "circuit_breaker \"b\" {\n  threshold = 3\n}\n",
			summary: "Unsupported argument",
			at:      "threshold",
		},
		{
			name:    "duplicate breaker",
			src:     "circuit_breaker \"b\" {}\ncircuit_breaker \"b\" {\n}\n",
			summary: "Duplicate circuit_breaker",
			detail:  `named "b" was already declared at cfg/main.wf.hcl:1`,
			at:      "circuit_breaker \"b\" {\n}",
		},
		{
			name:    "undeclared breaker with a suggestion",
			src:     "circuit_breaker \"payment_api\" {}\nretry_policy \"p\" {\n  maximum_attempts = 2\n  circuit_breaker = circuit_breaker.payment_apj\n}\n",
			summary: "Reference to undeclared circuit breaker",
			detail:  `Did you mean circuit_breaker.payment_api?`,
			at:      "circuit_breaker.payment_apj",
		},
		{
			name:    "breaker reference not a reference",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 2\n  circuit_breaker = \"api\"\n}\n",
			summary: "Invalid circuit_breaker reference",
			at:      `"api"`,
		},
		{
			name:    "bad on_open",
			src:     "circuit_breaker \"b\" {}\nretry_policy \"p\" {\n  maximum_attempts = 2\n  circuit_breaker = circuit_breaker.b\n  on_open = \"retry\"\n}\n",
			summary: "Invalid on_open",
			detail:  `got "retry"`,
			at:      `"retry"`,
		},
		{
			name:    "on_open without a breaker",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  retry {\n    maximum_attempts = 2\n    on_open = \"fail\"\n  }\n}"),
			summary: "on_open without a circuit breaker",
			at:      `"fail"`,
		},
		{
			name:    "interrupted in failures",
			src:     "circuit_breaker \"b\" {\n  failures = [\"interrupted\"]\n}\n",
			summary: "Interrupted attempts never count",
			at:      `["interrupted"]`,
			warning: true,
		},
		{
			name:    "budget cycle",
			src:     budget("a", "b") + budget("b", "c") + budget("c", "a"),
			summary: "Retry budget cycle",
			detail:  "retry_budget.a -> retry_budget.b -> retry_budget.c -> retry_budget.a",
			at:      "retry_budget.b",
		},
		{
			name:    "budget is its own parent",
			src:     budget("a", "a"),
			summary: "Retry budget cycle",
			detail:  "retry_budget.a -> retry_budget.a",
			at:      "retry_budget.a\n",
		},
		{
			name:    "undeclared parent",
			src:     budget("team", "orgg") + "retry_budget \"org\" {\n  max_retries = 1\n  window = \"1m\"\n}\n",
			summary: "Reference to undeclared retry budget",
			detail:  "Did you mean retry_budget.org?",
			at:      "retry_budget.orgg",
		},
		{
			name:    "heartbeat_timeout on http",
			src:     wrap("activity \"a\" {\n  http { url = \"http://x\" }\n  heartbeat_timeout = \"5s\"\n}"),
			summary: "heartbeat_timeout on a http activity",
			at:      "heartbeat_timeout",
		},
		{
			name:    "zero heartbeat_timeout",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  heartbeat_timeout = \"0s\"\n}"),
			summary: "Invalid heartbeat_timeout",
			at:      `"0s"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := load(t, tt.src, LoadOptions{})
			got := errorsOf(diags)
			if tt.warning {
				if len(got) > 0 {
					t.Fatalf("want only warnings, got errors: %v", got)
				}
				got = warningsOf(diags)
			}
			if len(got) != 1 {
				t.Fatalf("want exactly one diagnostic, got %d: %v", len(got), diags)
			}
			d := got[0]
			if d.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", d.Summary, tt.summary)
			}
			if !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("detail = %q, want it to contain %q", d.Detail, tt.detail)
			}
			if d.Subject == nil {
				t.Fatal("diagnostic has no subject")
			}
			line, col := posOf(t, tt.src, tt.at)
			if d.Subject.Start.Line != line || d.Subject.Start.Column != col {
				t.Errorf("subject starts at %d:%d, want %d:%d", d.Subject.Start.Line, d.Subject.Start.Column, line, col)
			}
		})
	}
}
