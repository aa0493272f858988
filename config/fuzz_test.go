package config

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/retry"
)

// FuzzLoad feeds arbitrary configuration and variable files through the
// whole loader and everything a caller does with its result. Any panic is
// a bug: every bad input must become a diagnostic.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("workflow \"w\" {\n  activity \"a\" {\n    sleep { duration = \"1s\" }\n  }\n}\n"), []byte(""))
	f.Fuzz(func(t *testing.T, src, vars []byte) {
		files := map[string][]byte{"main.wf.hcl": src}
		if len(vars) > 0 {
			files["f.auto.wfvars"] = vars
		}
		cfg, diags := LoadFiles("fuzz", files, LoadOptions{
			// Undeclared WF_VAR_ entries are ignored, so these do not make
			// every seed invalid.
			Env: []string{"WF_VAR_n=1", "WF_VAR_s=[1]", "WF_VAR_l=[\"a\"]"},
		})
		if cfg == nil {
			t.Fatal("nil config")
		}
		if err := WriteDiagnostics(io.Discard, diags, cfg.Sources, true); err != nil {
			t.Fatal(err)
		}
		_, _ = Format(src, "main.wf.hcl")
		if diags.HasErrors() {
			if len(cfg.Workflows) != 0 {
				t.Fatal("workflows returned with errors")
			}
			return
		}
		if cfg.Hash == "" {
			t.Fatal("valid config without hash")
		}
		out, err := OutputsValue(json.RawMessage(`{"result": {"id": "x", "n": 1}, "stdout": "s", "exit_code": 0}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range cfg.Workflows {
			for _, a := range w.Activities {
				up := map[string]cty.Value{}
				for _, d := range a.DependsOn {
					up[d] = out
				}
				_, _ = a.Resolve(up)
				_, _ = a.Resolve(nil)
				for _, r := range a.Rules {
					if r.RetryIf != nil {
						_, _ = r.RetryIf(retry.Failure{Type: "http:503", Message: "m"}, 2, 1500)
					}
				}
			}
		}
	})
}
