package config

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// posOf returns the 1-based line and column of the first occurrence of
// marker in src, the independent expectation for a diagnostic's Subject.
func posOf(t *testing.T, src, marker string) (line, col int) {
	t.Helper()
	i := strings.Index(src, marker)
	if i < 0 {
		t.Fatalf("marker %q not in source", marker)
	}
	line = strings.Count(src[:i], "\n") + 1
	col = i - strings.LastIndex(src[:i], "\n")
	return line, col
}

const okExec = `exec { command = ["true"] }`

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		summary string
		detail  string // substring of the detail
		at      string // marker where the subject starts
		warning bool
	}{
		{
			name:    "unknown top-level block",
			src:     "resource \"x\" \"y\" {}\n",
			summary: "Unsupported block type",
			detail:  `Blocks of type "resource" are not expected here.`,
			at:      "resource",
		},
		{
			name:    "unknown attribute in policy",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  max_tries = 3\n}\n",
			summary: "Unsupported argument",
			detail:  `An argument named "max_tries" is not expected here.`,
			at:      "max_tries",
		},
		{
			name:    "unknown block in activity",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  on_failure {}\n}"),
			summary: "Unsupported block type",
			detail:  `Blocks of type "on_failure" are not expected here.`,
			at:      "on_failure",
		},
		{
			name:    "missing http url",
			src:     wrap("activity \"a\" {\n  http { method = \"POST\" }\n}"),
			summary: "Missing required argument",
			detail:  `The argument "url" is required`,
			at:      "method",
		},
		{
			name:    "missing sleep duration",
			src:     wrap("activity \"a\" {\n  sleep {}\n}"),
			summary: "Missing required argument",
			detail:  `The argument "duration" is required`,
			at:      "{}",
		},
		{
			name:    "missing budget window",
			src:     "retry_budget \"b\" {\n  max_retries = 3\n}\n",
			summary: "Missing required argument",
			detail:  `The argument "window" is required`,
			at:      "{\n  max",
		},
		{
			name:    "undeclared variable",
			src:     wrap("key = \"k-${var.nope}\"\nactivity \"a\" {\n  " + okExec + "\n}"),
			summary: "Reference to undeclared input variable",
			detail:  `An input variable named "nope" has not been declared.`,
			at:      "var.nope",
		},
		{
			name:    "undeclared local",
			src:     wrap("activity \"a\" {\n  exec { command = [local.cmd] }\n}"),
			summary: "Reference to undeclared local value",
			detail:  `A local value named "cmd" has not been declared`,
			at:      "local.cmd",
		},
		{
			name:    "undeclared activity",
			src:     wrap("activity \"a\" {\n  exec { command = [activity.ghost.stdout] }\n}"),
			summary: "Reference to undeclared activity",
			detail:  `There is no activity named "ghost" in this workflow.`,
			at:      "activity.ghost",
		},
		{
			name:    "activity in another workflow",
			src:     "workflow \"one\" {\n  activity \"x\" {\n    " + okExec + "\n  }\n}\n" + wrap("activity \"a\" {\n  exec { command = [activity.x.stdout] }\n}"),
			summary: "Reference to undeclared activity",
			detail:  `There is no activity named "x" in this workflow.`,
			at:      "activity.x.stdout",
		},
		{
			name:    "self reference",
			src:     wrap("activity \"a\" {\n  exec { command = [activity.a.stdout] }\n}"),
			summary: "Self-referential activity",
			detail:  `Activity "a" cannot refer to its own outputs`,
			at:      "activity.a.stdout",
		},
		{
			name:    "self depends_on",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  depends_on = [activity.a]\n}"),
			summary: "Self-referential activity",
			detail:  `Activity "a" cannot depend on itself.`,
			at:      "activity.a]",
		},
		{
			name:    "undeclared depends_on",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  depends_on = [activity.b]\n}"),
			summary: "Reference to undeclared activity",
			detail:  `There is no activity named "b" in this workflow.`,
			at:      "activity.b]",
		},
		{
			name:    "activity reference from key",
			src:     wrap("key = activity.a.stdout\nactivity \"a\" {\n  " + okExec + "\n}"),
			summary: "Invalid reference",
			detail:  "Activity outputs cannot be used in a workflow key",
			at:      "activity.a.stdout",
		},
		{
			name:    "activity reference from locals",
			src:     "locals {\n  x = activity.a.stdout\n}\n",
			summary: "Invalid reference",
			detail:  "Activity outputs cannot be used in locals",
			at:      "activity.a",
		},
		{
			name:    "activity reference from policy",
			src:     "retry_policy \"p\" {\n  maximum_attempts = length(activity.a.stdout)\n}\n",
			summary: "Invalid reference",
			detail:  "Activity outputs cannot be used in a retry policy",
			at:      "activity.a",
		},
		{
			name:    "activity reference from timeout",
			src:     wrap("activity \"b\" {\n  " + okExec + "\n}\nactivity \"a\" {\n  " + okExec + "\n  timeout = activity.b.stdout\n}"),
			summary: "Invalid reference",
			detail:  `Activity outputs cannot be used in activity "a" outside its kind block`,
			at:      "activity.b.stdout",
		},
		{
			name:    "unknown root",
			src:     wrap("activity \"a\" {\n  exec { command = [self.path] }\n}"),
			summary: "Unknown reference",
			detail:  `There is nothing named "self" to refer to in an activity.`,
			at:      "self.path",
		},
		{
			name:    "unknown policy",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  retry = retry_policy.nope\n}"),
			summary: "Reference to undeclared retry policy",
			detail:  `There is no retry_policy "nope" in this configuration.`,
			at:      "retry_policy.nope",
		},
		{
			name:    "unknown base policy",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  retry {\n    policy = retry_policy.gone\n  }\n}"),
			summary: "Reference to undeclared retry policy",
			detail:  `There is no retry_policy "gone" in this configuration.`,
			at:      "retry_policy.gone",
		},
		{
			name:    "unknown budget",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  budget = retry_budget.nope\n}\n",
			summary: "Reference to undeclared retry budget",
			detail:  `There is no retry_budget "nope" in this configuration.`,
			at:      "retry_budget.nope",
		},
		{
			name:    "budget not a reference",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  budget = \"api\"\n}\n",
			summary: "Invalid budget reference",
			detail:  "budget must be a reference like retry_budget.NAME.",
			at:      `"api"`,
		},
		{
			name:    "bad duration",
			src:     "retry_policy \"payment\" {\n  maximum_attempts = 3\n  initial_interval = \"1x\"\n}\n",
			summary: "Invalid duration",
			detail:  `"1x" is not a valid duration (Go syntax, like "250ms" or "1m30s").`,
			at:      `"1x"`,
		},
		{
			name:    "negative duration",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  timeout = \"-5s\"\n}"),
			summary: "Invalid duration",
			detail:  `"-5s" is negative; timeout must be zero or more.`,
			at:      `"-5s"`,
		},
		{
			name:    "bad sleep duration",
			src:     wrap("activity \"a\" {\n  sleep { duration = \"10 minutes\" }\n}"),
			summary: "Invalid duration",
			detail:  `"10 minutes" is not a valid duration`,
			at:      `"10 minutes"`,
		},
		{
			name:    "coefficient below one",
			src:     "retry_policy \"p\" {\n  maximum_attempts    = 3\n  backoff_coefficient = 0.5\n}\n",
			summary: "Invalid backoff_coefficient",
			detail:  "backoff_coefficient must be at least 1 (and finite), got 0.5",
			at:      "0.5",
		},
		{
			name:    "maximum below initial",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  initial_interval = \"10s\"\n  maximum_interval = \"2s\"\n}\n",
			summary: "Invalid maximum_interval",
			detail:  "maximum_interval (2s) is shorter than initial_interval (10s)",
			at:      `"2s"`,
		},
		{
			name: "override initial above base maximum",
			src: "retry_policy \"p\" {\n  maximum_attempts = 3\n  maximum_interval = \"2s\"\n}\n" +
				wrap("activity \"a\" {\n  "+okExec+"\n  retry {\n    policy = retry_policy.p\n    initial_interval = \"5s\"\n  }\n}"),
			summary: "Invalid maximum_interval",
			detail:  "maximum_interval (2s) is shorter than initial_interval (5s)",
			at:      `"5s"`,
		},
		{
			name:    "negative attempts",
			src:     "retry_policy \"p\" {\n  maximum_attempts = -1\n}\n",
			summary: "Invalid maximum_attempts",
			detail:  "maximum_attempts must be zero (unlimited) or more, got -1.",
			at:      "-1",
		},
		{
			name:    "fractional attempts",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 2.5\n}\n",
			summary: "Invalid number",
			detail:  "maximum_attempts must be a whole number, got 2.5.",
			at:      "2.5",
		},
		{
			name:    "no kind",
			src:     wrap("activity \"idle\" {\n  timeout = \"1s\"\n}"),
			summary: "Missing activity kind",
			detail:  `Activity "idle" needs exactly one exec, http or sleep block`,
			at:      `activity "idle"`,
		},
		{
			name:    "several kinds",
			src:     wrap("activity \"both\" {\n  " + okExec + "\n  sleep { duration = \"1s\" }\n}"),
			summary: "Multiple activity kinds",
			detail:  `Activity "both" has a exec block and a sleep block`,
			at:      "sleep {",
		},
		{
			name:    "command and script",
			src:     wrap("activity \"a\" {\n  exec {\n    command = [\"x\"]\n    script = \"x\"\n  }\n}"),
			summary: "Conflicting command and script",
			detail:  "either command (argv, no shell) or script",
			at:      "script",
		},
		{
			name:    "neither command nor script",
			src:     wrap("activity \"a\" {\n  exec { dir = \".\" }\n}"),
			summary: "Missing command or script",
			detail:  "An exec block needs command",
			at:      "exec",
		},
		{
			name:    "duplicate workflow",
			src:     wrap("activity \"a\" {\n  "+okExec+"\n}") + "workflow \"w\" { # again\n}\n",
			summary: "Duplicate workflow",
			detail:  `A workflow named "w" was already declared at cfg/main.wf.hcl:1,1-13.`,
			at:      "workflow \"w\" { # again",
		},
		{
			name:    "duplicate activity",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n}\nactivity \"a\" {\n  sleep { duration = \"1s\" }\n}"),
			summary: "Duplicate activity",
			detail:  `An activity named "a" was already declared at cfg/main.wf.hcl:2,1-13.`,
			at:      "activity \"a\" {\n  sleep",
		},
		{
			name:    "duplicate policy",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 1\n}\nretry_policy \"p\" {\n  maximum_attempts = 2\n}\n",
			summary: "Duplicate retry_policy",
			detail:  `A retry_policy named "p" was already declared at cfg/main.wf.hcl:1,1-17.`,
			at:      "retry_policy \"p\" {\n  maximum_attempts = 2",
		},
		{
			name:    "duplicate local",
			src:     "locals {\n  a = 1\n}\nlocals {\n  a = 2\n}\n",
			summary: "Duplicate local value",
			detail:  `A local value named "a" was already declared at cfg/main.wf.hcl:2,3-4.`,
			at:      "a = 2",
		},
		{
			name:    "duplicate variable",
			src:     "variable \"v\" {\n  default = 1\n}\nvariable \"v\" {\n  default = 2\n}\n",
			summary: "Duplicate variable",
			detail:  `A variable named "v" was already declared at cfg/main.wf.hcl:1,1-13.`,
			at:      "variable \"v\" {\n  default = 2",
		},
		{
			name:    "bad jitter word",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  jitter = \"wild\"\n}\n",
			summary: "Invalid jitter",
			detail:  `jitter must be "none", "full", "equal", "decorrelated" or a number in (0,1], got "wild".`,
			at:      `"wild"`,
		},
		{
			name:    "bad jitter number",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  jitter = 1.5\n}\n",
			summary: "Invalid jitter",
			detail:  "or a number in (0,1], got 1.5.",
			at:      "1.5",
		},
		{
			name:    "bad backoff",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  backoff = \"quadratic\"\n}\n",
			summary: "Invalid backoff",
			detail:  `backoff must be "exponential", "linear" or "fixed", got "quadratic".`,
			at:      `"quadratic"`,
		},
		{
			name:    "bad on_exhausted",
			src:     "retry_budget \"b\" {\n  max_retries  = 3\n  window       = \"1m\"\n  on_exhausted = \"panic\"\n}\n",
			summary: "Invalid on_exhausted",
			detail:  `on_exhausted must be "wait" or "fail", got "panic".`,
			at:      `"panic"`,
		},
		{
			name:    "zero budget window",
			src:     "retry_budget \"b\" {\n  max_retries = 3\n  window      = \"0s\"\n}\n",
			summary: "Invalid window",
			detail:  "window must be longer than zero",
			at:      `"0s"`,
		},
		{
			name:    "retry without on not last",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  retry {\n    maximum_attempts = 2\n  }\n  retry {\n    on = [\"http:429\"]\n    maximum_attempts = 5\n  }\n}"),
			summary: "Retry rule without on is not last",
			detail:  "Only the last retry block of an activity may leave out `on`",
			at:      "retry {\n    maximum_attempts = 2",
		},
		{
			name:    "empty on",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  retry {\n    on = []\n    maximum_attempts = 2\n  }\n}"),
			summary: "Empty on",
			detail:  "on must list at least one error pattern",
			at:      "[]",
		},
		{
			name:    "retry attribute and blocks",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n}\n" + wrap("activity \"a\" {\n  "+okExec+"\n  retry = retry_policy.p\n  retry {\n    maximum_attempts = 2\n  }\n}"),
			summary: "Conflicting retry settings",
			detail:  `Activity "a" has both a retry attribute and retry blocks.`,
			at:      "retry = ",
		},
		{
			name:    "local cycle",
			src:     "locals {\n  a = local.b\n  b = \"${local.a}-x\"\n}\n",
			summary: "Cycle in local values",
			detail:  "local.a -> local.b -> local.a",
			at:      "local.a}",
		},
		{
			name:    "retry_if not bool",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  retry_if = attempt + 1\n}\n",
			summary: "Invalid retry_if",
			detail:  "retry_if must be a bool expression, but this one is a number.",
			at:      "attempt + 1",
		},
		{
			name:    "retry_if unknown reference",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  retry_if = err.type == \"x\"\n}\n",
			summary: "Unknown reference",
			detail:  `There is nothing named "err" to refer to in retry_if.`,
			at:      "err.type",
		},
		{
			name:    "retry_if unknown error attribute",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  retry_if = error.code == 3\n}\n",
			summary: "Unsupported attribute",
			detail:  `does not have an attribute named "code"`,
			at:      ".code",
		},
		{
			name:    "wrong attribute type",
			src:     wrap("activity \"a\" {\n  exec { command = \"ls -l\" }\n}"),
			summary: "Incorrect attribute value type",
			detail:  `Inappropriate value for attribute "command": list of string required, but have string.`,
			at:      `"ls -l"`,
		},
		{
			name:    "bad URL",
			src:     wrap("activity \"a\" {\n  http { url = \"ftp://x\" }\n}"),
			summary: "Invalid URL",
			detail:  `"ftp://x" is not a usable URL: the scheme must be http or https.`,
			at:      `"ftp://x"`,
		},
		{
			name:    "bad expect_status",
			src:     wrap("activity \"a\" {\n  http {\n    url = \"http://x\"\n    expect_status = [200, 42]\n  }\n}"),
			summary: "Invalid HTTP status",
			detail:  "42 is not an HTTP status (100-599).",
			at:      "[200, 42]",
		},
		{
			name:    "invalid name",
			src:     "workflow \"my order\" {\n}\n",
			summary: "Invalid name",
			detail:  `"my order" is not a valid workflow name`,
			at:      `"my order"`,
		},
		{
			name:    "missing required variable",
			src:     "variable \"token\" {\n  type = string\n}\n",
			summary: "No value for required variable",
			detail:  `The variable "token" has no default`,
			at:      "variable",
		},
		{
			name:    "default of wrong type",
			src:     "variable \"n\" {\n  type = number\n  default = \"many\"\n}\n",
			summary: "Invalid value for variable",
			detail:  `The default value of variable "n" does not match its type number: a number is required.`,
			at:      `"many"`,
		},
		{
			name:    "forever policy warning",
			src:     "retry_policy \"forever\" {\n  initial_interval = \"1s\"\n}\n",
			summary: "Retry policy can retry forever",
			detail:  `retry_policy "forever" has no maximum_attempts and no expiration, so a failure that keeps happening is retried forever. Set maximum_attempts (e.g. 5) or expiration (e.g. "10m").`,
			at:      "retry_policy",
			warning: true,
		},
		{
			name:    "zero maximum_retry_after",
			src:     "retry_policy \"p\" {\n  maximum_attempts = 3\n  maximum_retry_after = \"0s\"\n}\n",
			summary: "Invalid maximum_retry_after",
			detail:  "maximum_retry_after must be longer than zero",
			at:      `"0s"`,
		},
		{
			name:    "negative maximum_retry_after in a retry block",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  retry {\n    maximum_attempts = 2\n    maximum_retry_after = \"-5m\"\n  }\n}"),
			summary: "Invalid duration",
			detail:  `"-5m" is negative; maximum_retry_after must be zero or more.`,
			at:      `"-5m"`,
		},
		{
			name:    "forever rule warning",
			src:     wrap("activity \"a\" {\n  " + okExec + "\n  retry {\n    backoff = \"fixed\"\n  }\n}"),
			summary: "Retry rule can retry forever",
			detail:  `This retry block of activity "a" has no maximum_attempts and no expiration`,
			at:      "retry {",
			warning: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := load(t, tt.src, LoadOptions{})
			want := errorsOf(diags)
			if tt.warning {
				if len(want) > 0 {
					t.Fatalf("want only warnings, got errors: %v", want)
				}
				want = warningsOf(diags)
			}
			if len(want) != 1 {
				t.Fatalf("want exactly one diagnostic, got %d: %v", len(want), diags)
			}
			d := want[0]
			if d.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", d.Summary, tt.summary)
			}
			if !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("detail = %q, want it to contain %q", d.Detail, tt.detail)
			}
			if d.Subject == nil {
				t.Fatalf("diagnostic has no subject")
			}
			line, col := posOf(t, tt.src, tt.at)
			if d.Subject.Start.Line != line || d.Subject.Start.Column != col {
				t.Errorf("subject starts at %d:%d, want %d:%d", d.Subject.Start.Line, d.Subject.Start.Column, line, col)
			}
			if d.Subject.Filename != "cfg/main.wf.hcl" {
				t.Errorf("subject filename = %q", d.Subject.Filename)
			}
		})
	}
}

// TestBadDurationExactRange pins the example from the brief: the whole
// quoted string is the subject.
func TestBadDurationExactRange(t *testing.T) {
	src := "retry_policy \"payment\" {\n  maximum_attempts = 3\n  initial_interval = \"1x\"\n}\n"
	_, diags := load(t, src, LoadOptions{})
	if len(diags) != 1 {
		t.Fatalf("got %v", diags)
	}
	got := *diags[0].Subject
	want := hcl.Range{Filename: "cfg/main.wf.hcl",
		Start: hcl.Pos{Line: 3, Column: 22, Byte: 69}, End: hcl.Pos{Line: 3, Column: 26, Byte: 73}}
	if got != want {
		t.Errorf("subject = %#v, want %#v", got, want)
	}
}

func TestValidConfigHasNoDiagnostics(t *testing.T) {
	cfg, diags := Load("testdata/valid/spec", LoadOptions{})
	if len(diags) != 0 {
		var sb strings.Builder
		_ = WriteDiagnostics(&sb, diags, cfg.Sources, false)
		t.Fatalf("diagnostics:\n%s", sb.String())
	}
}

func TestUnknownFunctionBehindUnknownValue(t *testing.T) {
	src := "retry_policy \"p\" {\n  maximum_attempts = 3\n  retry_if = attempt < 3 && startz(error.type, \"x\")\n}\n"
	_, diags := load(t, src, LoadOptions{})
	errs := errorsOf(diags)
	if len(errs) != 1 || errs[0].Summary != "Call to unknown function" || errs[0].Detail != `There is no function named "startz".` {
		t.Fatalf("diags = %v", diags)
	}
	line, col := posOf(t, src, "startz")
	if s := errs[0].Subject; s.Start.Line != line || s.Start.Column != col {
		t.Errorf("subject = %v", s)
	}
}

// wantOneError loads src and checks that it gives exactly one error, with
// that summary, a detail containing detail, and its subject starting where
// the marker at first stands in src.
func wantOneError(t *testing.T, src, summary, detail, at string) {
	t.Helper()
	_, diags := load(t, src, LoadOptions{})
	errs := errorsOf(diags)
	if len(errs) != 1 {
		t.Fatalf("want one error, got %v", diags)
	}
	d := errs[0]
	if d.Summary != summary || !strings.Contains(d.Detail, detail) {
		t.Errorf("got %q: %q\nwant %q containing %q", d.Summary, d.Detail, summary, detail)
	}
	line, col := posOf(t, src, at)
	if d.Subject == nil || d.Subject.Start.Line != line || d.Subject.Start.Column != col {
		t.Errorf("subject = %v, want %d:%d", d.Subject, line, col)
	}
}
