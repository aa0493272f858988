package planner

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/statefile/record"
)

func loadCfg(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, diags := config.LoadFiles("cfg", map[string][]byte{"main.wf.hcl": []byte(src)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	return cfg
}

func render(t *testing.T, p *Plan) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, p, false); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// succeededRec is the record an apply leaves for a succeeded activity
// with the definition cfg resolves to now.
func succeededRec(t *testing.T, cfg *config.Config, name string, outputs string) *record.Activity {
	t.Helper()
	a := cfg.Workflows[0].Activity(name)
	if a.ForEach != nil {
		els, _, _ := a.Elements(nil)
		for _, el := range els {
			if el.Name == name {
				a = el
			}
		}
	}
	res, diags := a.Resolve(nil)
	if diags.HasErrors() {
		t.Fatalf("resolve %s: %v", name, diags)
	}
	return &record.Activity{Workflow: "w", Instance: "default", Name: name, Generation: 1, DefHash: res.Hash(),
		Status: record.StatusSucceeded, Attempts: 1, Outputs: []byte(outputs)}
}

// TestPlanElements: one line per element, removed elements and
// activities, the summary counting elements and what is forgotten.
func TestPlanElements(t *testing.T) {
	src := `workflow "w" {
  activity "fetch" {
    for_each = toset(["a", "b", "c"])
    exec { command = ["fetch", each.key] }
    retry { maximum_attempts = 3 }
  }
}`
	cfg := loadCfg(t, src)
	p, diags := Build(cfg, nil, Options{Now: time.Unix(0, 0)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out := render(t, p)
	want := `Workflow instance w/default:
  + activity.fetch["a"] (exec)
      retry: 3 attempts, waits 1s 2s, at most 3s of waiting
  + activity.fetch["b"] (exec)
  + activity.fetch["c"] (exec)

Plan: 3 to run, 0 to re-run, 0 to resume, 0 unchanged.
`
	if out != want {
		t.Errorf("plan:\n%s\nwant:\n%s", out, want)
	}
	if ap := p.Instances[0].Activities[1]; ap.Block != "fetch" || ap.Key == nil || *ap.Key != "b" {
		t.Errorf("element plan %+v", ap)
	}

	// Later: "b" unchanged, "c" gone with a pending retry, "x" removed.
	st := memState{instances: map[string]map[string]*record.Activity{"w/default": {
		`fetch["b"]`: succeededRec(t, cfg, `fetch["b"]`, `{}`),
		`fetch["z"]`: {Workflow: "w", Instance: "default", Name: `fetch["z"]`, Generation: 1, Status: record.StatusWaiting, Attempts: 1,
			Timer: &record.Timer{Kind: record.TimerRetry, Attempt: 2}},
		"x": {Workflow: "w", Instance: "default", Name: "x", Generation: 1, Status: record.StatusSucceeded},
	}}}
	p, diags = Build(cfg, st, Options{Now: time.Unix(0, 0)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out = render(t, p)
	for _, line := range []string{
		`  = activity.fetch["b"] (exec)`,
		`  - activity.fetch["z"] (exec)  # no longer in for_each; its state will be forgotten; its pending retry (attempt 2) will be cancelled`,
		`  - activity.x  # removed from configuration; its state will be forgotten`,
		`Plan: 2 to run, 0 to re-run, 0 to resume, 1 unchanged, 2 to forget.`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("missing %q in:\n%s", line, out)
		}
	}
	if !p.HasChanges() || p.Removed() != 2 {
		t.Errorf("changes %v removed %d", p.HasChanges(), p.Removed())
	}
}

// TestPlanForEachUnknown: a for_each that needs an upstream result which
// will run is planned as a whole, known after that upstream; once the
// upstream is unchanged, its elements are planned from the stored result.
func TestPlanForEachUnknown(t *testing.T) {
	src := `workflow "w" {
  activity "list" {
    exec { command = ["list"] }
  }
  activity "fetch" {
    for_each = toset(activity.list.result)
    exec { command = ["fetch", each.key, activity.list.stdout] }
  }
}`
	cfg := loadCfg(t, src)
	p, diags := Build(cfg, nil, Options{Now: time.Unix(0, 0)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out := render(t, p)
	if !strings.Contains(out, "  + activity.fetch (exec)  # one element per key of for_each (known after activity.list)\n") ||
		!strings.Contains(out, "Plan: 2 to run") {
		t.Errorf("plan:\n%s", out)
	}
	if ap := p.Instances[0].Activities[1]; ap.Name != "fetch" || len(ap.KnownAfter) != 1 || ap.KnownAfter[0] != "activity.list" {
		t.Errorf("block plan %+v", ap)
	}
	list := succeededRec(t, cfg, "list", `{"result":["b","a"],"stdout":"L"}`)
	st := memState{instances: map[string]map[string]*record.Activity{"w/default": {"list": list}}}
	p, diags = Build(cfg, st, Options{Now: time.Unix(0, 0)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out = render(t, p)
	if !strings.Contains(out, `  + activity.fetch["a"] (exec)`) || !strings.Contains(out, `  + activity.fetch["b"] (exec)`) || !strings.Contains(out, "Plan: 2 to run, 0 to re-run, 0 to resume, 1 unchanged.") {
		t.Errorf("plan:\n%s", out)
	}
}

// TestPlanMoved: a moved activity keeps its state: unchanged, said so.
func TestPlanMoved(t *testing.T) {
	src := `workflow "w" {
  activity "charge" {
    exec { command = ["charge"] }
  }
  moved {
    from = activity.charge_card
    to   = activity.charge
  }
}`
	cfg := loadCfg(t, src)
	rec := succeededRec(t, cfg, "charge", `{}`)
	rec.Name = "charge_card"
	p, diags := Build(cfg, memState{instances: map[string]map[string]*record.Activity{"w/default": {"charge_card": rec}}}, Options{Now: time.Unix(0, 0)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out := render(t, p)
	if !strings.Contains(out, "  = activity.charge (exec)  # moved from activity.charge_card\n") || !strings.Contains(out, "0 to run, 0 to re-run, 0 to resume, 1 unchanged.") {
		t.Errorf("plan:\n%s", out)
	}
	if !p.HasChanges() {
		t.Error("a move is a change the apply must make")
	}
}

// TestPlanReplaceAddresses: -replace takes element addresses, a whole
// for_each, and says what was meant when it names nothing.
func TestPlanReplaceAddresses(t *testing.T) {
	src := `workflow "w" {
  activity "fetch" {
    for_each = toset(["a", "b"])
    exec { command = ["fetch", each.key] }
  }
  activity "one" {
    exec { command = ["one"] }
  }
}`
	cfg := loadCfg(t, src)
	st := memState{instances: map[string]map[string]*record.Activity{"w/default": {
		`fetch["a"]`: succeededRec(t, cfg, `fetch["a"]`, `{}`),
		`fetch["b"]`: succeededRec(t, cfg, `fetch["b"]`, `{}`),
		"one":        succeededRec(t, cfg, "one", `{}`),
	}}}
	actions := func(replace ...string) string {
		p, diags := Build(cfg, st, Options{Replace: replace, Now: time.Unix(0, 0)})
		if diags.HasErrors() {
			t.Fatalf("%v: %v", replace, diags)
		}
		var s []string
		for _, a := range p.Instances[0].Activities {
			s = append(s, a.Action.Symbol())
		}
		return strings.Join(s, "")
	}
	if got := actions(`activity.fetch["b"]`); got != "=~=" {
		t.Errorf("element: %s", got)
	}
	if got := actions("activity.fetch"); got != "~~=" {
		t.Errorf("block: %s", got)
	}
	if got := actions(`w.activity.fetch["a"]`); got != "~==" {
		t.Errorf("workflow prefix: %s", got)
	}
	for _, tt := range []struct{ addr, want string }{
		{"activity.fetc", "Did you mean activity.fetch?"},
		{`activity.fetch["c"]`, `activity.fetch has no element "c".`},
		{`activity.fetch["bb"]`, `Did you mean activity.fetch["b"]?`},
		{`activity.one["x"]`, "has no for_each, so it has no elements"},
		{"wx.activity.one", "Did you mean w.activity.one?"},
		{"fetch", "is not an activity address"},
	} {
		_, diags := Build(cfg, st, Options{Replace: []string{tt.addr}, Now: time.Unix(0, 0)})
		if !diags.HasErrors() || !strings.Contains(diags[0].Detail, tt.want) {
			t.Errorf("-replace=%s: %v, want %q", tt.addr, diags, tt.want)
		}
	}
}

// TestPlanSkippedStaysUnchanged: a compensation step that was not needed
// (skipped by its trigger rule or when) plans as up to date while what it
// depends on stays unchanged.
func TestPlanSkippedStaysUnchanged(t *testing.T) {
	src := `workflow "w" {
  activity "ship" {
    exec { command = ["ship"] }
  }
  activity "refund" {
    trigger_rule = "any_failed"
    depends_on   = [activity.ship]
    exec { command = ["refund"] }
  }
  activity "audit" {
    when = activity.ship.result == "audit"
    exec { command = ["audit"] }
  }
}`
	cfg := loadCfg(t, src)
	skipped := func(name, reason string) *record.Activity {
		return &record.Activity{Workflow: "w", Instance: "default", Name: name, Generation: 1, Status: record.StatusSkipped, FailReason: reason}
	}
	st := memState{instances: map[string]map[string]*record.Activity{"w/default": {
		"ship":   succeededRec(t, cfg, "ship", `{"result":"no"}`),
		"refund": skipped("refund", "no_upstream_failed"),
		"audit":  skipped("audit", "condition_false"),
	}}}
	p, diags := Build(cfg, st, Options{Now: time.Unix(0, 0)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if out := render(t, p); out != "No changes. Workflow instance w/default is up to date.\n" {
		t.Errorf("plan:\n%s", out)
	}
	// The condition is true now: audit runs.
	st.instances["w/default"]["ship"] = succeededRec(t, cfg, "ship", `{"result":"audit"}`)
	p, _ = Build(cfg, st, Options{Now: time.Unix(0, 0)})
	if out := render(t, p); !strings.Contains(out, "+ activity.audit (exec)  # skipped last time (condition false); it may run now") {
		t.Errorf("plan:\n%s", out)
	}
}
