package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestStateAndHistory(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": flakyConfig})

	// Before any apply there is nothing to list or show.
	if r := wf(t, "state", "list", dir); r.code != 0 || r.stdout != "" {
		t.Errorf("state list without state: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := wf(t, "state", "show", "order/order-1", dir); r.code != 1 || !strings.Contains(r.stderr, "no state") {
		t.Errorf("state show without state: exit %d, stderr %q", r.code, r.stderr)
	}

	if r := wf(t, "apply", "-auto-approve", dir); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	r := wf(t, "state", "list", dir)
	if r.code != 0 || r.stdout != "order/order-1  2 activities: 2 succeeded\n" {
		t.Errorf("state list: exit %d, stdout %q", r.code, r.stdout)
	}

	r = wf(t, "state", "show", "order/order-1", dir)
	if r.code != 0 {
		t.Fatalf("state show: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"activity.charge\n", "activity.ship\n", "status           succeeded", "attempts         3", "idempotency key  wf2-", `"ch_1"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("state show lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := wf(t, "state", "show", "order/nope", dir); r.code != 1 || !strings.Contains(r.stderr, "order/nope is not in the state") {
		t.Errorf("state show unknown: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := wf(t, "state", "show", "bad-address", dir); r.code != 1 || !strings.Contains(r.stderr, "WORKFLOW/KEY") {
		t.Errorf("state show bad address: exit %d, stderr %q", r.code, r.stderr)
	}

	// history -json: one object per attempt, flags after the arguments.
	r = wf(t, "history", "order/order-1", "charge", dir, "-json")
	if r.code != 0 {
		t.Fatalf("history -json: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("history -json: %d lines, want 3:\n%s", len(lines), r.stdout)
	}
	var key string
	for i, line := range lines {
		var e historyEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if e.Attempt != i+1 || e.Activity != "activity.charge" || e.Instance != "order/order-1" || e.Generation != 1 {
			t.Errorf("line %d: %+v", i+1, e)
		}
		if key == "" {
			key = e.IdempotencyKey
		} else if e.IdempotencyKey != key {
			t.Errorf("idempotency key changed across attempts: %s vs %s", key, e.IdempotencyKey)
		}
		if e.End == nil || e.End.Before(e.Start) || e.DurationMs == nil {
			t.Errorf("line %d: bad end/duration: %+v", i+1, e)
		}
		failed := i < 2
		if failed != (e.Outcome == "failed") || failed != (e.Error != nil) || failed != (e.WaitMs != nil) {
			t.Errorf("line %d: outcome %s error %v wait %v", i+1, e.Outcome, e.Error, e.WaitMs)
		}
		if failed && e.Error.Type != "exit:1" {
			t.Errorf("line %d: error %+v", i+1, e.Error)
		}
		if time.Since(e.Start) > time.Minute {
			t.Errorf("line %d: start %v", i+1, e.Start)
		}
	}

	// The table covers every activity.
	r = wf(t, "history", "order/order-1", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "activity.charge\n") || !strings.Contains(r.stdout, "activity.ship\n") ||
		!strings.Contains(r.stdout, "WAIT BEFORE NEXT") || strings.Count(r.stdout, "exit:1") != 2 {
		t.Errorf("history table: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := wf(t, "history", "order/order-1", "activity.nope", dir); r.code != 1 {
		t.Errorf("history of an unknown activity: exit %d", r.code)
	}

	r = wf(t, "state", "rm", "order/order-1", dir)
	if r.code != 0 || r.stdout != "Removed order/order-1.\n" {
		t.Errorf("state rm: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := wf(t, "state", "list", dir); r.code != 0 || r.stdout != "" {
		t.Errorf("state list after rm: %q", r.stdout)
	}
	if r := wf(t, "state", "rm", "order/order-1", dir); r.code != 1 {
		t.Errorf("second state rm: exit %d", r.code)
	}
	// Everything runs again after rm.
	if r := wf(t, "plan", "-detailed-exitcode", dir); r.code != 2 || !strings.Contains(r.stdout, "2 to run") {
		t.Errorf("plan after rm: exit %d\n%s", r.code, r.stdout)
	}
}

func TestStateDirOverride(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	stateDir := t.TempDir() + "/custom"
	if r := wf(t, "apply", "-auto-approve", "-state-dir", stateDir, dir); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	if r := wf(t, "state", "list", dir); r.stdout != "" {
		t.Errorf("default state dir should be empty: %q", r.stdout)
	}
	r := invocation{args: []string{"state", "list", dir}, env: []string{"WF_STATE_DIR=" + stateDir}}.run(t)
	if !strings.HasPrefix(r.stdout, "order/order-1001 ") {
		t.Errorf("WF_STATE_DIR: %q %q", r.stdout, r.stderr)
	}
	r = wf(t, "state", "list", "--state-dir", stateDir, dir)
	if !strings.HasPrefix(r.stdout, "order/order-1001 ") {
		t.Errorf("-state-dir: %q %q", r.stdout, r.stderr)
	}
}
