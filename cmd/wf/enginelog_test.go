package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineLogHasNoSecrets: wf.log says who opened the state and how it
// closed, and never holds what activities printed, their outputs, error
// messages or the values of variables, whatever they contain.
func TestEngineLogHasNoSecrets(t *testing.T) {
	const secret = "s3cr3t-token-9f2c"
	dir := writeConfig(t, map[string]string{"main.wf.hcl": `variable "token" {
  type = string
}

workflow "w" {
  key = "k"

  activity "leak" {
    exec {
      script = "echo \"$TOKEN\"; echo \"$TOKEN\" >&2; printf '{\"type\":\"Leaky\",\"message\":\"%s\"}' \"$TOKEN\" > \"$WF_ERROR_FILE\"; exit 1"
      env    = { TOKEN = var.token }
    }
    retry {
      maximum_attempts = 2
      initial_interval = "10ms"
    }
  }

  activity "ok" {
    exec {
      script = "echo \"{\\\"t\\\": \\\"$TOKEN\\\"}\""
      env    = { TOKEN = var.token }
    }
  }
}
`})
	r := invocation{args: []string{"apply", "-auto-approve", dir}, env: []string{"WF_VAR_token=" + secret}}.run(t)
	if r.code != 1 || !strings.Contains(r.stdout, "Leaky") {
		t.Fatalf("apply: exit %d (want 1)\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The secret did reach the state (outputs, errors), so the check
	// below means something.
	if show := wf(t, "state", "show", "-full", "w/k", dir); !strings.Contains(show.stdout, secret) {
		t.Fatalf("the secret is not in the state; the test proves nothing:\n%s", show.stdout)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".wf", "wf.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{"INFO engine: state opened by wf apply", "INFO engine: state closed cleanly"} {
		if !strings.Contains(log, want) {
			t.Errorf("wf.log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, secret) {
		t.Errorf("wf.log holds the secret:\n%s", log)
	}
	fi, err := os.Stat(filepath.Join(dir, ".wf", "wf.log"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("wf.log mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}
