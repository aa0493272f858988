package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update to accept):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestWriteDiagnosticsGolden(t *testing.T) {
	cfg, diags := Load("testdata/diagnostics", LoadOptions{Vars: []string{"nope=1"}})
	if !diags.HasErrors() {
		t.Fatal("want errors")
	}
	for _, tt := range []struct {
		name  string
		color bool
	}{{"plain", false}, {"color", true}} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteDiagnostics(&buf, diags, cfg.Sources, tt.color); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "diagnostics", tt.name+".golden"), buf.Bytes())
		})
	}
}

func TestWriteDiagnosticsSnippet(t *testing.T) {
	src := []byte("a = 1\nretry_policy \"payment\" {\n  initial_interval = \"1x\"\n}\n")
	d := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid duration",
		Detail:   `"1x" is not a valid duration (Go syntax, like "250ms" or "1m30s").`,
		Subject: &hcl.Range{Filename: "examples/x/main.wf.hcl",
			Start: hcl.Pos{Line: 3, Column: 22, Byte: 52}, End: hcl.Pos{Line: 3, Column: 26, Byte: 56}},
	}}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, d, map[string][]byte{"examples/x/main.wf.hcl": src}, false); err != nil {
		t.Fatal(err)
	}
	want := `Error: Invalid duration

  on examples/x/main.wf.hcl:3:22, in retry_policy "payment":
  3:   initial_interval = "1x"
                          ^^^^

"1x" is not a valid duration (Go syntax, like "250ms" or "1m30s").
`
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestWriteDiagnosticsSurvivesBadRanges(t *testing.T) {
	d := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "A", Subject: &hcl.Range{Filename: "f", Start: hcl.Pos{Byte: 500}, End: hcl.Pos{Byte: 2}}},
		{Severity: hcl.DiagWarning, Summary: "B", Subject: &hcl.Range{Filename: "f", Start: hcl.Pos{Byte: 3}, End: hcl.Pos{Byte: 1}}},
		{Severity: hcl.DiagError, Summary: "C", Detail: "no subject"},
		nil,
	}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, d, map[string][]byte{"f": []byte("abc\ndef")}, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte("no subject")) {
		t.Errorf("output = %q", buf.String())
	}
}

func TestFormat(t *testing.T) {
	in := []byte("workflow \"w\" {\nkey=\"k\"\n  activity \"a\" {\n exec {\n command = [\"x\"]\n   dir=\".\"\n }\n  }\n}\n")
	got, diags := Format(in, "in.wf.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	golden(t, filepath.Join("testdata", "format", "simple.golden"), got)
	again, _ := Format(got, "in.wf.hcl")
	if !bytes.Equal(again, got) {
		t.Errorf("formatting is not idempotent:\n%s", again)
	}

	_, diags = Format([]byte("workflow \"w\" {\n  key = \n"), "bad.wf.hcl")
	if !diags.HasErrors() || diags[0].Subject == nil || diags[0].Subject.Filename != "bad.wf.hcl" {
		t.Errorf("diags = %v", diags)
	}
}
