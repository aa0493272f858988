package main

import (
	"strings"
	"testing"
	"time"
)

// TestTemporalForEach: the same fan-out on Temporal: the interpreter runs
// the same core, so the for_each expands when list's result is known, each
// element is an activity with its own attempts and key, the compensation
// step runs, and wf output reads the instance from Temporal.
func TestTemporalForEach(t *testing.T) {
	e := newTEnv(t, `
workflow "fan" {
  key = "k"
  activity "list" {
    exec { command = ["echo", "[\"b\", \"a\"]"] }
  }
  activity "fetch" {
    for_each = toset(activity.list.result)
    exec { command = ["sh", "-c", "[ \"$0\" = a ] || exit 3; echo got $0", each.key] }
  }
  activity "undo" {
    trigger_rule = "any_failed"
    exec { command = ["echo", "undone ${activity.fetch["a"].stdout}"] }
  }
  output "got" {
    value = trimspace(activity.fetch["a"].stdout)
  }
}
`)
	e.worker()
	p := e.apply()
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}
	p.waitEvent(t, time.Second, "activity_expanded", func(ev map[string]any) bool {
		return ev["type"] == "activity_expanded" && ev["activity"] == "activity.fetch"
	})
	hs := e.history("fan/k")
	keys := map[string]string{}
	for _, h := range hs {
		keys[h.Activity] = h.IdempotencyKey
	}
	if keys[`activity.fetch["a"]`] == "" || keys[`activity.fetch["b"]`] == "" || keys[`activity.fetch["a"]`] == keys[`activity.fetch["b"]`] || keys["activity.undo"] == "" {
		t.Errorf("history keys %v", keys)
	}
	out, errOut, code := e.wf("output", "-engine", "temporal", "fan/k", "got", e.dir)
	if code != 0 || strings.TrimSpace(out) != `"got a"` {
		t.Errorf("wf output: exit %d %q %s", code, out, errOut)
	}
	out, _, _ = e.wf("plan", "-engine", "temporal", "-no-color", e.dir)
	if !strings.Contains(out, `! activity.fetch["b"] (exec)`) || !strings.Contains(out, `= activity.fetch["a"] (exec)`) {
		t.Errorf("plan -engine temporal:\n%s", out)
	}
}
