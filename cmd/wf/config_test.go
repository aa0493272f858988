package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simpleConfig is a two-activity workflow whose second activity uses the
// first one's result.
const simpleConfig = `variable "order_id" {
  type    = string
  default = "1001"
}

workflow "order" {
  key = "order-${var.order_id}"

  activity "charge" {
    exec {
      script = "echo '{\"id\": \"ch_1\"}'"
    }
  }

  activity "ship" {
    exec {
      command = ["echo", activity.charge.result.id]
    }
    retry {
      maximum_attempts = 3
      initial_interval = "1s"
    }
  }
}
`

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		code   int
		stdout string
		stderr []string
	}{
		{
			name:   "valid",
			files:  map[string]string{"main.wf.hcl": simpleConfig},
			code:   0,
			stdout: "Success! The configuration is valid.\n",
		},
		{
			name: "syntax error",
			files: map[string]string{"main.wf.hcl": `workflow "a" {
  activity "x" {
    exec { command = [ }
  }
}
`},
			code:   1,
			stderr: []string{"main.wf.hcl:3:"},
		},
		{
			name: "bad duration",
			files: map[string]string{"main.wf.hcl": `workflow "a" {
  activity "x" {
    exec { command = ["true"] }
    timeout = "soon"
  }
}
`},
			code:   1,
			stderr: []string{"main.wf.hcl:4:"},
		},
		{
			name: "cycle",
			files: map[string]string{"main.wf.hcl": `workflow "a" {
  activity "x" {
    exec { command = ["true"] }
    depends_on = [activity.y]
  }
  activity "y" {
    exec { command = ["true"] }
    depends_on = [activity.x]
  }
}
`},
			code:   1,
			stderr: []string{"main.wf.hcl:", "x", "y"},
		},
		{
			name: "warning only",
			files: map[string]string{"main.wf.hcl": `workflow "a" {
  activity "x" {
    exec { command = ["true"] }
    retry {
      initial_interval = "1s"
    }
  }
}
`},
			code:   0,
			stdout: "Success! The configuration is valid, but there was 1 warning.\n",
			stderr: []string{"main.wf.hcl:4:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeConfig(t, tt.files)
			r := wf(t, "validate", "-no-color", dir)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.stdout != "" && r.stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, tt.stdout)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr does not contain %q:\n%s", s, r.stderr)
				}
			}
			if tt.code != 0 && strings.Contains(r.stdout, "Success") {
				t.Errorf("stdout claims success:\n%s", r.stdout)
			}
		})
	}
}

func TestValidateMissingDir(t *testing.T) {
	r := wf(t, "validate", filepath.Join(t.TempDir(), "nope"))
	if r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestFmt(t *testing.T) {
	const messy = "workflow \"a\" {\nactivity \"x\" {\nexec { command = [\"true\"] }\ntimeout=\"1s\"\n}\n}\n"
	dir := writeConfig(t, map[string]string{
		"a.wf.hcl":      messy,
		"b.wf.hcl":      simpleConfig,
		"x.auto.wfvars": "order_id=\"7\"\n",
		"notes.hcl":     messy, // not a wf file: left alone
		"z.wf.hcl.orig": messy,
	})
	path := filepath.Join(dir, "a.wf.hcl")

	r := wf(t, "fmt", "-check", dir)
	if r.code != 1 {
		t.Fatalf("fmt -check: exit %d, want 1; stderr %s", r.code, r.stderr)
	}
	want := filepath.Join(dir, "a.wf.hcl") + "\n" + filepath.Join(dir, "x.auto.wfvars") + "\n"
	if r.stdout != want {
		t.Errorf("fmt -check listed %q, want %q", r.stdout, want)
	}
	if b, _ := os.ReadFile(path); string(b) != messy {
		t.Errorf("fmt -check changed the file:\n%s", b)
	}

	// Flags after the directory work too.
	r = wf(t, "fmt", dir, "-no-color")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("fmt: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(path)
	if string(b) == messy || !strings.Contains(string(b), "  activity \"x\" {") || !strings.Contains(string(b), "timeout = \"1s\"") {
		t.Errorf("fmt did not rewrite the file:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.hcl")); string(b) != messy {
		t.Errorf("fmt touched notes.hcl")
	}

	r = wf(t, "fmt", "-check", dir)
	if r.code != 0 || r.stdout != "" {
		t.Errorf("fmt -check after fmt: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestFmtStdinAndErrors(t *testing.T) {
	r := invocation{args: []string{"fmt", "-"}, stdin: "a=1\nbb = 2\n"}.run(t)
	if r.code != 0 || r.stdout != "a  = 1\nbb = 2\n" {
		t.Errorf("fmt -: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	dir := writeConfig(t, map[string]string{"bad.wf.hcl": "workflow \"a\" {\n"})
	r = wf(t, "fmt", "-no-color", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "bad.wf.hcl:") {
		t.Errorf("fmt of a broken file: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestGraph(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	r := wf(t, "graph", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "digraph") || !strings.Contains(r.stdout, "->") ||
		!strings.Contains(r.stdout, "charge") || !strings.Contains(r.stdout, "ship") {
		t.Errorf("graph output lacks the edge charge -> ship:\n%s", r.stdout)
	}
	if r := wf(t, "graph", "-workflow", "nope", dir); r.code != 1 || !strings.Contains(r.stderr, `no workflow "nope"`) {
		t.Errorf("unknown -workflow: exit %d, stderr %q", r.code, r.stderr)
	}
}
