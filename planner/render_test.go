package planner

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func preview(p retry.Policy) retry.Preview { return p.Preview(previewWaits) }

func symbolsPlan() *Plan {
	s := time.Second
	return &Plan{ConfigHash: "c", Created: planNow, Instances: []InstancePlan{{
		Workflow: "order", Key: "order-1001",
		Activities: []ActivityPlan{
			{Name: "validate", Kind: "exec", Action: ActionUnchanged, Generation: 1},
			{Name: "charge_card", Kind: "exec", Action: ActionRun, Generation: 1, Rules: []RulePreview{
				{Preview: preview(paymentPolicy)},
			}},
			{Name: "ship", Kind: "http", Action: ActionRerun, Reason: "definition changed", Generation: 2, DependsOn: []string{"charge_card"}, Rules: []RulePreview{
				{On: []string{"http:429", "http:503"}, Preview: preview(retry.Policy{Backoff: retry.Fixed, InitialInterval: 5 * s, MaximumAttempts: 20})},
				{Preview: preview(retry.Policy{Backoff: retry.Exponential, InitialInterval: s, Coefficient: 2, MaximumInterval: 8 * s,
					MaximumAttempts: 3, Jitter: retry.Jitter{Mode: retry.JitterFull}})},
			}},
			{Name: "capture", Kind: "http", Action: ActionResume, Reason: "attempt 3 due in 4s (2025-03-04T12:00:04Z)", ResumeAttempt: 3,
				DueAt: planNow.Add(4 * s), Generation: 1, Rules: []RulePreview{
					{Preview: preview(retry.Policy{Backoff: retry.Exponential, InitialInterval: s, Coefficient: 2, MaximumInterval: 30 * s,
						Expiration: 2 * time.Minute, Jitter: retry.Jitter{Mode: retry.JitterFraction, Fraction: 0.2}})},
				}},
			{Name: "notify", Kind: "exec", Action: ActionRetryFailed, Reason: "failed last time: exit:1 (max_attempts); runs again from attempt 1", Generation: 3},
			{Name: "poll", Kind: "http", Action: ActionRun, Generation: 1, Rules: []RulePreview{
				{Preview: preview(retry.Policy{Backoff: retry.Linear, InitialInterval: 10 * time.Second, MaximumInterval: time.Minute,
					Jitter: retry.Jitter{Mode: retry.JitterDecorrelated}})},
			}},
			{Name: "once", Kind: "exec", Action: ActionRun, Generation: 1, Rules: []RulePreview{{Preview: preview(retry.Policy{MaximumAttempts: 1})}}},
			{Name: "cool_down", Kind: "sleep", Action: ActionRun, Generation: 1},
		},
	}}}
}

func TestRenderGolden(t *testing.T) {
	unchanged := func(wf, key string) InstancePlan {
		return InstancePlan{Workflow: wf, Key: key, Activities: []ActivityPlan{{Name: "a", Kind: "exec", Action: ActionUnchanged, Generation: 1}}}
	}
	mixed := symbolsPlan()
	mixed.Instances = append([]InstancePlan{unchanged("billing", "default")}, mixed.Instances...)

	// A plan produced by Build against state, end to end.
	cfg := orderConfig()
	r := fakeResolver{defs: map[string]string{}}
	recs := map[string]*record.Activity{}
	recs["charge"] = &record.Activity{Name: "charge", Generation: 1, Status: record.StatusSucceeded, Outputs: outputs(map[string]any{"id": "c-1"})}
	recs["charge"].DefHash = r.hashFor(t, cfg.Workflows[0].Activity("charge"), recs)
	recs["ship"] = &record.Activity{Name: "ship", Generation: 1, Status: record.StatusWaiting, Attempts: 2,
		Timer: &record.Timer{Kind: record.TimerRetry, Attempt: 3, FireAt: planNow.Add(90 * time.Second)}}
	built, diags := build(cfg, memState{instances: map[string]map[string]*record.Activity{"order/order-1001": recs}}, Options{Now: planNow}, r.resolve)
	if diags.HasErrors() {
		t.Fatal(diags)
	}

	// Interrupted attempts, end to end: a crash mid-attempt resumes at
	// once, an opt-out fails (and then shows as ! for a person to check).
	optOut := paymentPolicy
	optOut.NonRetryable = []string{"interrupted"}
	icfg := &config.Config{Hash: "h", Workflows: []*config.Workflow{workflow("deploy", "prod",
		act("migrate", config.KindExec, 3),
		act("rollout", config.KindExec, 8),
		act("announce", config.KindExec, 13),
		act("charge", config.KindExec, 18),
	)}}
	icfg.Workflows[0].Activities[0].Rules = []retry.Rule{{Policy: optOut}}
	icfg.Workflows[0].Activities[2].Rules = []retry.Rule{{Policy: optOut}}
	irecs := map[string]*record.Activity{
		"migrate":  {Name: "migrate", Generation: 1, Status: record.StatusFailed, Attempts: 2, FailReason: "interrupted", LastError: &record.Error{Type: "interrupted"}},
		"rollout":  {Name: "rollout", Generation: 1, Status: record.StatusRunning, Attempts: 1},
		"announce": {Name: "announce", Generation: 1, Status: record.StatusRunning, Attempts: 1},
		"charge": {Name: "charge", Generation: 1, Status: record.StatusWaiting, Attempts: 2, Interrupted: 1,
			Timer: &record.Timer{Kind: record.TimerRetry, Attempt: 3, FireAt: planNow, Source: "interrupted"}},
	}
	interrupted, diags := build(icfg, memState{instances: map[string]map[string]*record.Activity{"deploy/prod": irecs}}, Options{Now: planNow}, fakeResolver{}.resolve)
	if diags.HasErrors() {
		t.Fatal(diags)
	}

	tests := []struct {
		name  string
		plan  *Plan
		color bool
	}{
		{"interrupted.golden", interrupted, false},
		{"symbols.golden", symbolsPlan(), false},
		{"symbols_color.golden", symbolsPlan(), true},
		{"no_changes.golden", &Plan{Instances: []InstancePlan{unchanged("order", "order-1001"), unchanged("billing", "default")}}, false},
		{"mixed.golden", mixed, false},
		{"built.golden", built, false},
		{"empty.golden", &Plan{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, tt.plan, tt.color); err != nil {
				t.Fatal(err)
			}
			if !tt.color && bytes.Contains(buf.Bytes(), []byte("\x1b[")) {
				t.Error("colour codes without color")
			}
			golden(t, tt.name, buf.Bytes())
		})
	}
}

func TestPreviewText(t *testing.T) {
	tests := []struct {
		p    retry.Policy
		want string
	}{
		{paymentPolicy, "5 attempts, waits 1s 2s 4s 8s, at most 15s of waiting"},
		{retry.Policy{MaximumAttempts: 1}, "1 attempt"},
		{retry.Policy{Backoff: retry.Fixed, InitialInterval: time.Minute, MaximumAttempts: 3, Jitter: retry.Jitter{Mode: retry.JitterEqual}},
			"3 attempts, waits 1m 1m, at most 2m of waiting, equal jitter"},
		{retry.Policy{Backoff: retry.Fixed, InitialInterval: 90 * time.Second},
			"unlimited attempts, waits 1m30s 1m30s 1m30s 1m30s 1m30s 1m30s ..."},
		{retry.Policy{Backoff: retry.Fixed, InitialInterval: time.Hour, Expiration: 3 * time.Hour},
			"unlimited attempts, waits 1h 1h, at most 2h of waiting, expires after 3h"},
		{retry.Policy{Backoff: retry.Fixed, InitialInterval: 250 * time.Millisecond, MaximumAttempts: 2, Jitter: retry.Jitter{Mode: retry.JitterFraction, Fraction: 0.25}},
			"2 attempts, waits 250ms, at most 250ms of waiting, 25% jitter"},
	}
	for _, tt := range tests {
		if got := PreviewText(tt.p.Preview(previewWaits)); got != tt.want {
			t.Errorf("PreviewText = %q\n            want %q", got, tt.want)
		}
	}
}

func TestWriteDOTGolden(t *testing.T) {
	cfg := orderConfig()
	cfg.Workflows = append(cfg.Workflows, workflow("billing", "default",
		act("invoice", config.KindExec, 50), act("mail", config.KindHTTP, 52, "invoice")))
	var buf bytes.Buffer
	if err := WriteDOT(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	golden(t, "graph.dot", buf.Bytes())
}
