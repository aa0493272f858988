package planner

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/config/configtest"
	"github.com/wf-engine/wf/statefile/record"
)

// fanOut10k is the plan benchmark's configuration: 10,000 elements, each
// with a retry block and a reference to an upstream output.
const fanOut10k = `workflow "fan" {
  activity "up" {
    exec { command = ["echo", "{\"url\": \"http://127.0.0.1:1\"}"] }
  }
  activity "work" {
    for_each = toset([for p in setproduct(range(100), range(100)) : format("k%02d%02d", p[0], p[1])])
    exec { command = ["true", each.key, activity.up.result.url] }
    retry {
      maximum_attempts = 3
      initial_interval = "1s"
    }
  }
}`

func loadFanOut(b testing.TB) *config.Config {
	cfg, diags := config.LoadFiles("cfg", map[string][]byte{"main.wf.hcl": []byte(fanOut10k)}, config.LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	return cfg
}

// BenchmarkPlanFanOut10k: loading and planning (and rendering) the
// 10,000-element fan-out, first against empty state.
func BenchmarkPlanFanOut10k(b *testing.B) {
	for b.Loop() {
		cfg := loadFanOut(b)
		p, diags := Build(cfg, nil, Options{Now: time.Unix(0, 0)})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if err := Render(io.Discard, p, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanFanOut10kUnchanged: the same after an apply: every element
// succeeded, so each is resolved against the stored upstream output and
// its hash compared.
func BenchmarkPlanFanOut10kUnchanged(b *testing.B) {
	cfg := loadFanOut(b)
	recs := map[string]*record.Activity{}
	w := cfg.Workflows[0]
	up, _ := w.Activity("up").Resolve(nil)
	recs["up"] = &record.Activity{Workflow: "fan", Instance: "default", Name: "up", Generation: 1, Status: record.StatusSucceeded,
		DefHash: up.Hash(), Outputs: []byte(`{"result":{"url":"http://127.0.0.1:1"},"stdout":"","exit_code":0}`)}
	upVal, _ := config.UpstreamValue(config.Upstream{Kind: config.KindExec, Status: config.StatusSucceeded, Outputs: recs["up"].Outputs})
	els, _, _ := w.Activity("work").Elements(nil)
	for _, el := range els {
		res, diags := el.Resolve(map[string]cty.Value{"up": upVal})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		recs[el.Name] = &record.Activity{Workflow: "fan", Instance: "default", Name: el.Name, Generation: 1, Status: record.StatusSucceeded, DefHash: res.Hash(), Outputs: []byte(`{}`)}
	}
	st := memState{instances: map[string]map[string]*record.Activity{"fan/default": recs}}
	b.ResetTimer()
	for b.Loop() {
		cfg := loadFanOut(b)
		p, diags := Build(cfg, st, Options{Now: time.Unix(0, 0)})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if p.HasChanges() {
			b.Fatal("changes")
		}
		run, rerun, _, unchanged := p.Counts()
		if unchanged != 10001 || run+rerun != 0 {
			b.Fatal(fmt.Sprint(p.Counts()))
		}
	}
}

// BenchmarkPlanBlocks10k: loading, planning and rendering 10,000 activity
// blocks against empty state, what `wf plan` does in process.
func BenchmarkPlanBlocks10k(b *testing.B) {
	src := []byte(configtest.Blocks(10000))
	b.ReportAllocs()
	for b.Loop() {
		cfg, diags := config.LoadFiles("cfg", map[string][]byte{"main.wf.hcl": src}, config.LoadOptions{})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		p, diags := Build(cfg, nil, Options{Now: time.Unix(0, 0)})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if err := Render(io.Discard, p, false); err != nil {
			b.Fatal(err)
		}
	}
}
