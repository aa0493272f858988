package config

import (
	"encoding/json"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// BenchmarkResolve is the per-attempt cost of evaluating an activity's kind
// block at run time, guards and budget included: the executor resolves each
// activity before each execution.
func BenchmarkResolve(b *testing.B) {
	cfg, diags := LoadFiles("bench", map[string][]byte{"main.wf.hcl": []byte(`
workflow "w" {
  activity "up" {
    exec { command = ["true"] }
  }
  activity "down" {
    http {
      url     = "http://127.0.0.1:1/orders/${activity.up.result.id}"
      method  = "POST"
      headers = { "Content-Type" = "application/json" }
      body    = jsonencode({ id = activity.up.result.id, items = [for i in activity.up.result.items : upper(i)] })
    }
  }
}
`)}, LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	out, err := OutputsValue(json.RawMessage(`{"result": {"id": "ch_1", "items": ["a", "b", "c"]}, "stdout": "", "exit_code": 0}`))
	if err != nil {
		b.Fatal(err)
	}
	a := cfg.Workflows[0].Activity("down")
	up := map[string]cty.Value{"up": out}
	b.ReportAllocs()
	for b.Loop() {
		if _, d := a.Resolve(up); d.HasErrors() {
			b.Fatal(d)
		}
	}
}

// BenchmarkResolveLiteralURL evaluates the kind block of every activity
// of the executor's BenchmarkHTTP10k: a literal url, no upstream. Such a
// block resolves to the result its load kept (TestConstantResolve); this
// is what evaluating it costs, as any block without upstreams does.
func BenchmarkResolveLiteralURL(b *testing.B) {
	foldConstantBlocks = false
	defer func() { foldConstantBlocks = true }()
	cfg, diags := LoadFiles("bench", map[string][]byte{"main.wf.hcl": []byte(`
workflow "w" {
  activity "h1" {
    http { url = "http://127.0.0.1:4567" }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 2
    }
  }
}
`)}, LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	a := cfg.Workflows[0].Activity("h1")
	b.ReportAllocs()
	for b.Loop() {
		if _, d := a.Resolve(nil); d.HasErrors() {
			b.Fatal(d)
		}
	}
}
