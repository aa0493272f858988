package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

// The golden files print times in the local zone: pin it, before any test
// runs, so that they read the same on every machine.
func init() { time.Local = time.UTC }

var viewNow = time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)

// runAt runs wf in-process with the clock at now and no terminal.
func runAt(t *testing.T, now time.Time, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &CLI{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Environ: baseEnv(t),
		IsTerminal: func(any) bool { return false }, Now: func() time.Time { return now }}
	code := c.Run(context.Background(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// longError is longer than any table cell, with a line break.
var longError = "the payment service answered 503 Service Unavailable: " + strings.Repeat("upstream connect error or disconnect/reset before headers. ", 3) + "\nretry later"

// showState writes an instance with every kind of thing the reading
// commands show into dir/.wf: ship ran before charge, but sorts after
// it; charge failed twice (a whole long error, a 250ms wait, an exec's
// retry_after), started over in generation 2 and succeeded with
// outputs; notify failed for good (non_retryable); cool_down is a sleep
// past its end.
func showState(t *testing.T, dir string) {
	t.Helper()
	st, err := statefile.Open(filepath.Join(dir, ".wf"), statefile.Options{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := func(sec float64) time.Time { return viewNow.Add(time.Duration(sec * float64(time.Second))) }
	out := &record.Output{Stdout: "charging card\n", Stderr: "503 from upstream\n", StderrBytes: 9000}
	ms := []record.Mutation{
		{Instance: &record.Instance{Workflow: "order", Key: "1001", Created: at(-600), Updated: at(-5)}},
		{Activity: &record.Activity{Workflow: "order", Instance: "1001", Name: "charge", Generation: 2, DefHash: "h-charge",
			IdempotencyKey: "k-charge-2", Status: record.StatusSucceeded, Attempts: 1, FirstStart: at(-60), Finished: at(-59.75),
			Outputs: json.RawMessage(`{"stdout":"{\"id\": \"ch_1\", \"receipt\": \"` + strings.Repeat("r", 250) + `\"}\n","stderr":"","exit_code":0,"result":{"id":"ch_1"}}`)}},
		{Attempt: &record.Attempt{Workflow: "order", Instance: "1001", Activity: "charge", Generation: 1, Number: 1, IdempotencyKey: "k-charge-1",
			Start: at(-300), End: at(-299.5), Outcome: record.OutcomeFailed, Error: &record.Error{Type: "http:503", Message: longError},
			Wait: 250 * time.Millisecond, HasWait: true, WaitSource: "policy", Output: out}},
		{Attempt: &record.Attempt{Workflow: "order", Instance: "1001", Activity: "charge", Generation: 1, Number: 2, IdempotencyKey: "k-charge-1",
			Start: at(-299.25), End: at(-299), Outcome: record.OutcomeFailed, Error: &record.Error{Type: "BankBusy", Message: "try in 90s"},
			Wait: 90 * time.Second, HasWait: true, WaitSource: "server"}},
		{Attempt: &record.Attempt{Workflow: "order", Instance: "1001", Activity: "charge", Generation: 1, Number: 3, IdempotencyKey: "k-charge-1",
			Start: at(-209), End: at(-200), Outcome: record.OutcomeInterrupted, Error: &record.Error{Type: "interrupted", Message: "the engine stopped"}}},
		{Attempt: &record.Attempt{Workflow: "order", Instance: "1001", Activity: "charge", Generation: 2, Number: 1, IdempotencyKey: "k-charge-2",
			Start: at(-60), End: at(-59.75), Outcome: record.OutcomeSucceeded, Output: &record.Output{Stdout: "{\"id\": \"ch_1\"}\n"}}},
		{Activity: &record.Activity{Workflow: "order", Instance: "1001", Name: "ship", Generation: 1, DefHash: "h-ship",
			IdempotencyKey: "k-ship-1", Status: record.StatusSucceeded, Attempts: 1, FirstStart: at(-400), Finished: at(-399),
			Outputs: json.RawMessage(`{"stdout":"shipped\n","stderr":"","exit_code":0}`)}},
		{Attempt: &record.Attempt{Workflow: "order", Instance: "1001", Activity: "ship", Generation: 1, Number: 1, IdempotencyKey: "k-ship-1",
			Start: at(-400), End: at(-399), Outcome: record.OutcomeSucceeded, Output: &record.Output{Stdout: "shipped\n"}}},
		{Activity: &record.Activity{Workflow: "order", Instance: "1001", Name: "notify", Generation: 1, DefHash: "h-notify",
			IdempotencyKey: "k-notify-1", Status: record.StatusFailed, Attempts: 1, FirstStart: at(-30), Finished: at(-29),
			FailReason: "non_retryable", LastError: &record.Error{Type: "BadAddress", Message: longError, NonRetryable: true}}},
		{Attempt: &record.Attempt{Workflow: "order", Instance: "1001", Activity: "notify", Generation: 1, Number: 1, IdempotencyKey: "k-notify-1",
			Start: at(-30), End: at(-29), Outcome: record.OutcomeFailed, Error: &record.Error{Type: "BadAddress", Message: longError, NonRetryable: true}}},
		{Activity: &record.Activity{Workflow: "order", Instance: "1001", Name: "cool_down", Generation: 1, DefHash: "h-cool",
			IdempotencyKey: "k-cool-1", Status: record.StatusWaiting, Attempts: 1, FirstStart: at(-20),
			Timer: &record.Timer{Kind: record.TimerSleep, FireAt: at(-2), Attempt: 1, Set: at(-20), Delay: 18 * time.Second}}},
		{Attempt: &record.Attempt{Workflow: "order", Instance: "1001", Activity: "cool_down", Generation: 1, Number: 1, IdempotencyKey: "k-cool-1",
			Start: at(-20), Outcome: record.OutcomeRunning}},
		{Instance: &record.Instance{Workflow: "deploy", Key: "prod", Created: at(-100), Updated: at(-100)}},
		{Activity: &record.Activity{Workflow: "deploy", Instance: "prod", Name: "roll_out", Generation: 1, DefHash: "h-roll",
			IdempotencyKey: "k-roll-1", Status: record.StatusPending}},
	}
	if err := st.Commit(ms); err != nil {
		t.Fatal(err)
	}
}

// TestReadViewsGolden: the human and -json forms of the reading commands
// on a known state (go test -update rewrites the golden files).
func TestReadViewsGolden(t *testing.T) {
	dir := t.TempDir()
	showState(t, dir)
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"state_list.golden", []string{"state", "list", dir}},
		{"state_list_json.golden", []string{"state", "list", "-json", dir}},
		{"state_show.golden", []string{"state", "show", "order/1001", dir}},
		{"state_show_full.golden", []string{"state", "show", "-full", "order/1001", dir}},
		{"state_show_json.golden", []string{"state", "show", "-json", "order/1001", dir}},
		{"history.golden", []string{"history", "order/1001", dir}},
		{"history_full.golden", []string{"history", "-full", "order/1001", "charge", dir}},
		{"history_json.golden", []string{"history", "-json", "order/1001", dir}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := runAt(t, viewNow, tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			checkGolden(t, tt.golden, r.stdout, dir)
		})
	}
}

// TestHistoryPromises checks the promises of the history golden files
// against the state, so that a careless -update cannot hide a regression.
func TestHistoryPromises(t *testing.T) {
	dir := t.TempDir()
	showState(t, dir)
	r := runAt(t, viewNow, "history", "order/1001", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	out := r.stdout
	// Execution order: ship ran first.
	if i, j := strings.Index(out, "activity.ship"), strings.Index(out, "activity.charge"); i < 0 || j < 0 || i > j {
		t.Errorf("activity.ship (ran first) is not before activity.charge:\n%s", out)
	}
	for _, want := range []string{
		"2026-05-06 11:55:00.000 UTC", // times with their zone
		"  250ms  ",                   // not 0.3s
		"1m30s (activity asked)",      // an exec's retry_after
		"  -- generation 2\n",
		"wf history -full shows them whole",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "server asked") {
		t.Errorf("history says (server asked) for no http error:\n%s", out)
	}
	// The # column is as wide as its widest number, not the heading.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  #  START") || strings.HasPrefix(line, "  1  2026") {
			continue
		}
		if strings.HasPrefix(line, "  #") {
			t.Errorf("the # column is widened: %q", line)
		}
	}
	full := runAt(t, viewNow, "history", "-full", "order/1001", "charge", dir).stdout
	for _, want := range []string{"retry later", "503 from upstream", "the last 18 of 9000 bytes"} {
		if !strings.Contains(full, want) {
			t.Errorf("history -full lacks %q:\n%s", want, full)
		}
	}
	// JSON: nothing cut, in execution order, each line versioned.
	js := runAt(t, viewNow, "history", "-json", "order/1001", dir).stdout
	var first historyEntry
	lines := strings.Split(strings.TrimSpace(js), "\n")
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Activity != "activity.ship" || first.FormatVersion != jsonFormatVersion {
		t.Errorf("first history line: %+v", first)
	}
	if !strings.Contains(js, `retry later`) || !strings.Contains(js, `"stderr_bytes":9000`) {
		t.Errorf("history -json cut the error or the output:\n%s", js)
	}
}

// TestStateShowPromises: the whole error and outputs on request, the
// reason as it is spelled everywhere, a past-due sleep due now.
func TestStateShowPromises(t *testing.T) {
	dir := t.TempDir()
	showState(t, dir)
	out := runAt(t, viewNow, "state", "show", "order/1001", dir).stdout
	for _, want := range []string{"reason           non_retryable", "(non_retryable)", "(due now)", "wf state show -full shows them whole"} {
		if !strings.Contains(out, want) {
			t.Errorf("state show lacks %q:\n%s", want, out)
		}
	}
	full := runAt(t, viewNow, "state", "show", "-full", "order/1001", dir).stdout
	for _, want := range []string{"retry later", strings.Repeat("r", 250), "attempt 1 printed:"} {
		if !strings.Contains(full, want) {
			t.Errorf("state show -full lacks %q:\n%s", want, full)
		}
	}
	var doc stateShowDoc
	if err := json.Unmarshal([]byte(runAt(t, viewNow, "state", "show", "-json", "order/1001", dir).stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.FormatVersion != jsonFormatVersion || len(doc.Activities) != 4 {
		t.Fatalf("state show -json: %+v", doc)
	}
	for _, a := range doc.Activities {
		if a.Activity == "activity.notify" && (a.LastError == nil || a.LastError.Message != longError || a.Reason != "non_retryable") {
			t.Errorf("state show -json cut notify's error: %+v", a.LastError)
		}
	}
}

const validateJSONConfig = `workflow "order" {
  key = "1"
  activity "a" {
    exec {
      command = ["true"]
    }
    retry {
      maximum_atempts = 3
    }
  }
}
`

// TestJSONDocsGolden: plan -json, validate -json and version -json.
func TestJSONDocsGolden(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	bad := writeConfig(t, map[string]string{"main.wf.hcl": validateJSONConfig})
	for _, tt := range []struct {
		golden, dir string
		args        []string
		code        int
	}{
		{"plan_json.golden", dir, []string{"plan", "-json", dir}, 0},
		{"validate_json.golden", dir, []string{"validate", "-json", dir}, 0},
		{"validate_json_error.golden", bad, []string{"validate", "-json", bad}, 1},
		{"version_json.golden", "", []string{"version", "-json"}, 0},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := runAt(t, viewNow, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tt.code, r.stderr)
			}
			got := strings.ReplaceAll(r.stdout, runtime.Version(), "$GO")
			got = strings.ReplaceAll(got, runtime.GOOS+"_"+runtime.GOARCH, "$PLATFORM")
			checkGolden(t, tt.golden, got, tt.dir)
		})
	}
	// The schedule preview is in numbers.
	var plan planDoc
	if err := json.Unmarshal([]byte(runAt(t, viewNow, "plan", "-json", dir).stdout), &plan); err != nil {
		t.Fatal(err)
	}
	ship := plan.Instances[0].Activities[1]
	if ship.Action != "run" || len(ship.Retry) != 1 || ship.Retry[0].MaxAttempts != 3 || len(ship.Retry[0].WaitsMs) != 2 || ship.Retry[0].WaitsMs[0] != 1000 {
		t.Errorf("plan -json ship: %+v", ship)
	}
}
