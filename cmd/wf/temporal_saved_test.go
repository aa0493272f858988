package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTemporalSavedPlan: wf plan -engine temporal -out saves a plan that
// wf apply -engine temporal FILE runs exactly, without asking; the local
// engine refuses it. A saved plan whose instance's records on Temporal
// changed since (another apply ran it), or whose configuration changed,
// is refused as stale and runs nothing.
func TestTemporalSavedPlan(t *testing.T) {
	e := newTEnv(t, `
workflow "sp" {
  key = "k"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log" }
    }
  }
  activity "b" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log" }
    }
    depends_on = [activity.a]
  }
}
`)
	e.worker()
	plans := t.TempDir()
	plan := func(name string, extra ...string) string {
		t.Helper()
		path := filepath.Join(plans, name)
		args := append([]string{"plan", "-engine", "temporal", "-out", path}, extra...)
		out, errOut, code := e.wf(append(args, e.dir)...)
		if code != 0 || !strings.Contains(out, "Saved the plan to: "+path) || !strings.Contains(out, "wf apply -engine temporal") {
			t.Fatalf("wf plan -out %s (exit %d):\n%s%s", name, code, out, errOut)
		}
		return path
	}
	applyFile := func(path string) (*durProc, int) {
		t.Helper()
		p := durStart(t, path, "-engine", "temporal", "-task-queue", e.queue)
		return p, p.wait(t, 90*time.Second)
	}
	logLines := func() int {
		return len(durReadLog(t, filepath.Join(e.dir, "log")))
	}

	first := plan("first.plan")
	if _, errOut, code := e.wf("apply", first); code != 1 || !strings.Contains(errOut, "wf apply -engine temporal") {
		t.Errorf("the local engine applied a Temporal plan (exit %d): %s", code, errOut)
	}
	if p, code := applyFile(first); code != 0 {
		t.Fatalf("wf apply -engine temporal %s exit %d:\n%s", first, code, p.stderr.String())
	} else if done := p.waitEvent(t, time.Second, "run_completed", evType("run_completed")); done["status"] != "succeeded" {
		t.Fatalf("run_completed = %v", done)
	}
	if n := logLines(); n != 2 {
		t.Fatalf("the saved plan ran %d attempts, want 2 (a, b)", n)
	}
	// Applying it again: the instance's records changed (it ran).
	if p, code := applyFile(first); code != 1 || !strings.Contains(p.stderr.String(), "saved plan is stale: state of sp/k changed") {
		t.Errorf("a spent plan applied again: exit %d, stderr:\n%s", code, p.stderr.String())
	}

	// Someone else runs the instance between the plan and its apply.
	replaceB := plan("replace-b.plan", "-replace", "activity.b")
	if _, errOut, code := e.wf("apply", "-engine", "temporal", "-task-queue", e.queue, "-auto-approve", "-replace", "activity.a", e.dir); code != 0 {
		t.Fatalf("wf apply -replace activity.a exit %d: %s", code, errOut)
	}
	before := logLines()
	if p, code := applyFile(replaceB); code != 1 || !strings.Contains(p.stderr.String(), "saved plan is stale: state of sp/k changed") {
		t.Errorf("a plan made before another apply was applied: exit %d, stderr:\n%s", code, p.stderr.String())
	}

	// The configuration changes between the plan and its apply.
	replaceA := plan("replace-a.plan", "-replace", "activity.a")
	main := filepath.Join(e.dir, "main.wf.hcl")
	src, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(strings.Replace(string(src), `env     = { LOG = "log" }`, `env     = { LOG = "log", V = "2" }`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, code := applyFile(replaceA); code != 1 || !strings.Contains(p.stderr.String(), "saved plan is stale: configuration changed") {
		t.Errorf("a plan of another configuration was applied: exit %d, stderr:\n%s", code, p.stderr.String())
	}
	if n := logLines(); n != before {
		t.Errorf("stale plans ran %d attempts", n-before)
	}
	// Restored, the same saved plan is current again and runs activity.a.
	if err := os.WriteFile(main, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, code := applyFile(replaceA); code != 0 {
		t.Fatalf("the restored plan: exit %d:\n%s", code, p.stderr.String())
	}
	if n := logLines(); n <= before {
		t.Errorf("the plan replacing activity.a ran nothing")
	}
}
