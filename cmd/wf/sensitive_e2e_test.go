package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The secrets of TestSecretsNeverShow: a sensitive variable's value, and
// a query parameter named like a secret written in the configuration.
const (
	secretToken = "tok-S3CRET-4711"
	secretParam = "literal-key-98765"
	plainMarker = "visible-marker-123"
)

const secretsConfig = `
variable "token" {
  sensitive = true
}
variable "plain" {
  default = "` + plainMarker + `"
}

workflow "w" {
  # Prints the secret on stdout and stderr, fails once with it in its
  # error, then succeeds.
  activity "echo" {
    exec {
      script = <<-EOT
        echo "$PLAIN token=$TOK"
        echo "stderr says $TOK" >&2
        if [ "$WF_ATTEMPT" = 1 ]; then
          printf '{"type":"Boom","message":"bad token %s"}' "$TOK" > "$WF_ERROR_FILE"
          exit 1
        fi
      EOT
      env = { TOK = var.token, PLAIN = var.plain }
    }
    retry {
      maximum_attempts = 2
      initial_interval = "10ms"
    }
  }

  # wf's own environment (WF_VAR_token) reaches exec activities: what
  # they print of it is removed too.
  activity "environment" {
    exec { script = "env | grep WF_VAR_ || true" }
  }

  # A refused connection: its error names the URL, with the key.
  activity "call" {
    http {
      url     = "http://127.0.0.1:1/x?api_key=` + secretParam + `&page=2"
      headers = { Authorization = "Bearer ${var.token}" }
    }
    retry {
      maximum_attempts = 2
      initial_interval = "10ms"
    }
  }

  # Runs whatever call did, and uses what echo printed.
  activity "after" {
    trigger_rule = "all_done"
    depends_on   = [activity.call]
    exec { command = ["echo", activity.echo.stdout, upper(var.token)] }
  }

  output "token" {
    value     = var.token
    sensitive = true
  }
  output "echoed" {
    value = activity.echo.stdout
  }
}
`

// TestSecretsNeverShow greps every output of every command, the dashboard's
// frames and every file of the state directory for the secrets, and finds
// them nowhere; the plain marker printed beside them is found (the search
// can find what is there).
func TestSecretsNeverShow(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": secretsConfig})
	env := []string{"WF_VAR_token=" + secretToken}
	var outputs []string
	runWF := func(name string, inv invocation) result {
		t.Helper()
		inv.env = append(inv.env, env...)
		r := inv.run(t)
		outputs = append(outputs, "=== "+name+" (stdout)\n"+r.stdout, "=== "+name+" (stderr)\n"+r.stderr)
		return r
	}
	runWF("plan", invocation{args: []string{"plan", dir}})
	if r := runWF("apply", invocation{args: []string{"apply", "-auto-approve", dir}}); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	runWF("apply -json", invocation{args: []string{"apply", "-auto-approve", "-json", "-replace=activity.echo", "-replace=activity.call", dir}})
	runWF("apply in a terminal", invocation{args: []string{"apply", "-auto-approve", "-replace=activity.echo", "-replace=activity.environment", dir}, terminal: true})
	runWF("plan after", invocation{args: []string{"plan", dir}})
	runWF("history", invocation{args: []string{"history", "w/default", dir}})
	runWF("history -json", invocation{args: []string{"history", "-json", "w/default", dir}})
	runWF("state show", invocation{args: []string{"state", "show", "w/default", dir}})
	runWF("state list", invocation{args: []string{"state", "list", dir}})
	runWF("output", invocation{args: []string{"output", "w/default", dir}})
	runWF("output token", invocation{args: []string{"output", "w/default", "token", dir}})
	runWF("stats", invocation{args: []string{"stats", dir}})
	all := strings.Join(outputs, "\n")

	var files []string
	err := filepath.WalkDir(filepath.Join(dir, ".wf"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, rel)
		for _, s := range []string{secretToken, secretParam, strings.ToUpper(secretToken)} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds the secret %q", rel, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stateBytes := readAll(t, dir, files)
	if !bytes.Contains(stateBytes, []byte(plainMarker)) {
		t.Errorf("the state files (%v) do not hold the plain marker: the search finds nothing at all", files)
	}
	if !strings.Contains(strings.Join(files, " "), "wf.log") {
		t.Errorf("no wf.log among %v", files)
	}
	for _, s := range []string{secretToken, secretParam, strings.ToUpper(secretToken)} {
		if i := strings.Index(all, s); i >= 0 {
			t.Errorf("an output shows the secret %q:\n...%s...", s, all[max(0, i-300):min(len(all), i+100)])
		}
	}
	for _, want := range []string{
		plainMarker + " token=(sensitive)", // apply, state show
		"bad token (sensitive)",            // the error, in history
		"api_key=(sensitive)",              // the URL in the connection error
		"token = (sensitive)",              // wf output
		"WF_VAR_token=(sensitive)",         // the inherited environment
		"wf apply · w/default",             // the dashboard drew
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no output shows %q", want)
		}
	}
	// wf output -json is for machines, and gives the value to whoever
	// asks, as Terraform does.
	r := invocation{args: []string{"output", "-json", "w/default", dir}, env: env}.run(t)
	if !strings.Contains(r.stdout, `"value": "`+secretToken+`"`) || !strings.Contains(r.stdout, `"sensitive": true`) {
		t.Errorf("wf output -json:\n%s", r.stdout)
	}
}

func readAll(t *testing.T, dir string, files []string) []byte {
	t.Helper()
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}
