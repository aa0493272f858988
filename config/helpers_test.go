package config

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

const testDir = "cfg"

// load loads one inline main.wf.hcl (plus optional extra files).
func load(t *testing.T, src string, opts LoadOptions, extra ...string) (*Config, hcl.Diagnostics) {
	t.Helper()
	files := map[string][]byte{"main.wf.hcl": []byte(src)}
	for i := 0; i+1 < len(extra); i += 2 {
		files[extra[i]] = []byte(extra[i+1])
	}
	return LoadFiles(testDir, files, opts)
}

// mustLoad loads src and fails on any error diagnostic.
func mustLoad(t *testing.T, src string, opts LoadOptions, extra ...string) *Config {
	t.Helper()
	cfg, diags := load(t, src, opts, extra...)
	if diags.HasErrors() {
		var sb strings.Builder
		_ = WriteDiagnostics(&sb, diags, cfg.Sources, false)
		t.Fatalf("unexpected errors:\n%s", sb.String())
	}
	return cfg
}

func errorsOf(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			out = append(out, d)
		}
	}
	return out
}

func warningsOf(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			out = append(out, d)
		}
	}
	return out
}

// wrap puts an activity body inside a workflow.
func wrap(activities string) string {
	return "workflow \"w\" {\n" + activities + "\n}\n"
}
