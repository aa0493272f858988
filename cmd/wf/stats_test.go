package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

var statsNow = time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)

// statsState writes a state with known attempts into dir/.wf:
//   - order/1001 and order/1002: charge_card retried after http:429 and
//     http:503 (server and policy waits), ship once each;
//   - order/1002's ship: interrupted by a crash, then generation 2 succeeds;
//   - order/1003: charge_card waiting for its budget since 30s before now,
//     after one budget wait that ended;
//   - deploy/prod: a running attempt.
func statsState(t *testing.T, dir string) {
	t.Helper()
	st, err := statefile.Open(filepath.Join(dir, ".wf"), statefile.Options{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := func(sec float64) time.Time { return statsNow.Add(time.Duration(sec * float64(time.Second))) }
	var ms []record.Mutation
	inst := func(wf, key string) {
		ms = append(ms, record.Mutation{Instance: &record.Instance{Workflow: wf, Key: key, Created: at(-600), Updated: at(-1)}})
	}
	act := func(wf, key, name string, gen int, status record.Status, timer *record.Timer) {
		ms = append(ms, record.Mutation{Activity: &record.Activity{Workflow: wf, Instance: key, Name: name, Generation: gen,
			Status: status, Attempts: 1, Timer: timer, IdempotencyKey: "k-" + key + "-" + name}})
	}
	type a struct {
		n          int
		start, end float64
		outcome    record.Outcome
		err        string
		wait       time.Duration
		src        string
		gen        int
	}
	atts := func(wf, key, name string, list ...a) {
		for _, x := range list {
			r := &record.Attempt{Workflow: wf, Instance: key, Activity: name, Generation: max(x.gen, 1), Number: x.n,
				IdempotencyKey: "k-" + key + "-" + name, Start: at(x.start), Outcome: x.outcome}
			if x.outcome != record.OutcomeRunning {
				r.End = at(x.end)
			}
			if x.err != "" {
				r.Error = &record.Error{Type: x.err, Message: x.err + " happened"}
			}
			if x.src != "" {
				r.Wait, r.HasWait, r.WaitSource = x.wait, true, x.src
			}
			ms = append(ms, record.Mutation{Attempt: r})
		}
	}
	inst("order", "1001")
	act("order", "1001", "charge_card", 1, record.StatusSucceeded, nil)
	atts("order", "1001", "charge_card",
		a{n: 1, start: -100, end: -99.9, outcome: record.OutcomeFailed, err: "http:429", wait: time.Second, src: "server"},
		a{n: 2, start: -98.9, end: -98.85, outcome: record.OutcomeFailed, err: "http:503", wait: 2 * time.Second, src: "policy"},
		a{n: 3, start: -96.85, end: -96.8, outcome: record.OutcomeSucceeded})
	act("order", "1001", "ship", 1, record.StatusSucceeded, nil)
	atts("order", "1001", "ship", a{n: 1, start: -96, end: -95.98, outcome: record.OutcomeSucceeded})

	inst("order", "1002")
	act("order", "1002", "charge_card", 1, record.StatusSucceeded, nil)
	atts("order", "1002", "charge_card",
		a{n: 1, start: -90, end: -89.7, outcome: record.OutcomeFailed, err: "http:503", wait: time.Second, src: "policy"},
		a{n: 2, start: -88.7, end: -88.6, outcome: record.OutcomeSucceeded})
	act("order", "1002", "ship", 2, record.StatusSucceeded, nil)
	atts("order", "1002", "ship",
		a{n: 1, start: -88, end: -20, outcome: record.OutcomeInterrupted, err: "interrupted", src: "policy"},
		a{n: 2, start: -20, end: -19.99, outcome: record.OutcomeSucceeded},
		a{n: 1, gen: 2, start: -10, end: -9.97, outcome: record.OutcomeSucceeded})

	inst("order", "1003")
	act("order", "1003", "charge_card", 1, record.StatusWaiting,
		&record.Timer{Kind: record.TimerBudget, FireAt: at(15), Attempt: 3, Set: at(-30), Delay: time.Second, Source: "budget"})
	atts("order", "1003", "charge_card",
		a{n: 1, start: -80, end: -79.5, outcome: record.OutcomeFailed, err: "http:503", wait: 12 * time.Second, src: "budget"},
		a{n: 2, start: -67.5, end: -30, outcome: record.OutcomeFailed, err: "timeout", wait: 45 * time.Second, src: "budget"})

	inst("deploy", "prod")
	act("deploy", "prod", "roll_out", 1, record.StatusRunning, nil)
	atts("deploy", "prod", "roll_out", a{n: 1, start: -5, outcome: record.OutcomeRunning})
	if err := st.Commit(ms); err != nil {
		t.Fatal(err)
	}
}

func runStats(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &CLI{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Environ: baseEnv(t),
		IsTerminal: func(any) bool { return false }, Now: func() time.Time { return statsNow }}
	code := c.Run(context.Background(), append([]string{"stats"}, args...))
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestStatsGolden(t *testing.T) {
	dir := t.TempDir()
	statsState(t, dir)
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"stats.golden", []string{dir}},
		{"stats_json.golden", []string{"-json", dir}},
		{"stats_workflow.golden", []string{dir, "-workflow", "deploy"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := runStats(t, tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			checkGolden(t, tt.golden, r.stdout, dir)
		})
	}
}

// TestStatsJSONFigures checks the -json figures the golden file holds
// against the state written above, so a wrong -update cannot slip by.
func TestStatsJSONFigures(t *testing.T) {
	dir := t.TempDir()
	statsState(t, dir)
	r := runStats(t, "-json", dir)
	var doc struct {
		FormatVersion string `json:"format_version"`
		Activities    []struct {
			Workflow, Activity           string
			Instances, Attempts, Retries int
			RetryRate                    float64 `json:"retry_rate"`
			ErrorTypes                   []struct {
				Type  string
				Count int
			} `json:"error_types"`
			Duration     *struct{ P50, P99, Count int64 } `json:"duration_ms"`
			RetryWaitMs  int64                            `json:"retry_wait_ms"`
			BudgetWaitMs int64                            `json:"budget_wait_ms"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if doc.FormatVersion != "1.0" || len(doc.Activities) != 3 {
		t.Fatalf("doc = %+v", doc)
	}
	cc := doc.Activities[1] // deploy.roll_out, order.charge_card, order.ship
	if cc.Activity != "activity.charge_card" || cc.Instances != 3 || cc.Attempts != 7 || cc.Retries != 4 {
		t.Errorf("charge_card = %+v", cc)
	}
	// 429 once, 503 three times (1001, 1002, 1003), timeout once.
	if len(cc.ErrorTypes) != 3 || cc.ErrorTypes[0].Type != "http:503" || cc.ErrorTypes[0].Count != 3 {
		t.Errorf("error types %+v", cc.ErrorTypes)
	}
	// Retry waits: 1s + 2s (1001) + 1s (1002). Budget waits: 12s that ended
	// in 1003, and 30s of the one still going on at now.
	if cc.RetryWaitMs != 4000 || cc.BudgetWaitMs != 42000 {
		t.Errorf("waits %d ms retry, %d ms budget", cc.RetryWaitMs, cc.BudgetWaitMs)
	}
	// Timed attempts: 100 50 50 300 100 500 37500 (ms): p50 100, p99 37500.
	if cc.Duration == nil || cc.Duration.Count != 7 || cc.Duration.P50 != 100 || cc.Duration.P99 != 37500 {
		t.Errorf("duration %+v", cc.Duration)
	}
	ship := doc.Activities[2]
	// The interrupted attempt is counted but not timed; generation 2 adds an
	// attempt 1 that is no retry.
	if ship.Attempts != 4 || ship.Retries != 1 || ship.Duration == nil || ship.Duration.Count != 3 {
		t.Errorf("ship = %+v", ship)
	}
	if roll := doc.Activities[0]; roll.Attempts != 1 || roll.Duration != nil {
		t.Errorf("a running attempt: %+v", roll)
	}
}

func TestStatsWithoutState(t *testing.T) {
	dir := t.TempDir()
	r := runStats(t, dir)
	if r.code != 0 || !strings.Contains(r.stdout, "No attempts recorded yet") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runStats(t, "-json", dir)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "{\n  \"format_version\": \"1.0\",\n  \"activities\": []\n}" {
		t.Errorf("exit %d, stdout %q", r.code, r.stdout)
	}
}
