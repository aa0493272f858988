package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		"· retry rate ",                    // the dashboard drew its header
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

// secretHeader is a header value named like a secret (X-Api-Key), written
// in the configuration as a literal.
const secretHeader = "hdr-literal-5555"

const socketSecretsConfig = `
variable "token" {
  sensitive = true
}
variable "release" {
  default = ""
}
variable "server" {
  default = ""
}

workflow "w" {
  activity "echo" {
    exec {
      script = <<-EOT
        echo "` + plainMarker + ` token=$TOK"
        if [ "$WF_ATTEMPT" = 1 ]; then
          printf '{"type":"Boom","message":"bad token %s"}' "$TOK" > "$WF_ERROR_FILE"
          exit 1
        fi
      EOT
      env = { TOK = var.token }
    }
    retry {
      maximum_attempts = 2
      initial_interval = "10ms"
    }
  }

  # The server answers with what it was sent: the URL and the headers.
  activity "echo_headers" {
    http {
      url     = "${var.server}/echo?api_key=` + secretParam + `"
      headers = { "X-Api-Key" = "` + secretHeader + `", Authorization = "Bearer ${var.token}" }
    }
  }

  # Holds the apply (and its event socket) open until the test has read
  # what came before.
  activity "hold" {
    depends_on = [activity.echo, activity.echo_headers]
    exec {
      script = "while [ ! -e \"$RELEASE\" ]; do sleep 0.05; done"
      env    = { RELEASE = var.release }
    }
  }

  output "token" {
    value     = var.token
    sensitive = true
  }
  output "echoed" {
    value = activity.echo.stdout
  }
  output "answer" {
    value = activity.echo_headers.body
  }
}
`

// TestSecretsNeverOnTheEventSocket reads the raw bytes of the event socket
// of a running apply (what wf watch and any other client gets: the replay
// and the live events, outputs included) and the files of the state
// afterwards, and finds no secret: not the sensitive variable, not a
// query parameter or a header named like a secret, even where the server
// echoes them back.
func TestSecretsNeverOnTheEventSocket(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "url=%s x-api-key=%s authorization=%s plain=%s\n", r.URL.String(), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), plainMarker)
	}))
	defer srv.Close()
	dir := writeConfig(t, map[string]string{"main.wf.hcl": socketSecretsConfig})
	release := filepath.Join(t.TempDir(), "release")
	a := &backgroundApply{done: make(chan int, 1)}
	c := &CLI{
		Stdin: strings.NewReader(""), Stdout: &a.stdout, Stderr: &a.stderr,
		Environ:    append(baseEnv(t), "WF_VAR_token="+secretToken),
		IsTerminal: func(any) bool { return false },
		Now:        time.Now,
	}
	go func() {
		a.done <- c.Run(t.Context(), []string{"apply", "-auto-approve", "-var", "release=" + release, "-var", "server=" + srv.URL, dir})
	}()
	sock := filepath.Join(dir, ".wf", "events.sock")
	deadline := time.Now().Add(60 * time.Second)
	var conn net.Conn
	for conn == nil && time.Now().Before(deadline) {
		if cn, err := net.Dial("unix", sock); err == nil {
			conn = cn
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if conn == nil {
		t.Fatal("the event socket never served")
	}
	defer conn.Close()
	raw := &lockedBuffer{}
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(raw, conn)
	}()
	for !strings.Contains(raw.String(), `"type":"attempt_started","workflow":"w","instance":"w/default","activity":"activity.hold"`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-a.done:
		if code != 0 {
			t.Fatalf("apply: exit %d\n%s\n%s", code, a.stdout.String(), a.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("apply did not end")
	}
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		t.Fatal("the socket stayed open after the apply")
	}
	stream := raw.String()
	files := map[string]string{"the event socket": stream, "apply's output": a.stdout.String() + a.stderr.String()}
	_ = filepath.WalkDir(filepath.Join(dir, ".wf"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[path] = string(b)
		return nil
	})
	for where, s := range files {
		for _, secret := range []string{secretToken, secretParam, secretHeader} {
			if i := strings.Index(s, secret); i >= 0 {
				t.Errorf("%s holds the secret %q: ...%s...", where, secret, s[max(0, i-200):min(len(s), i+100)])
			}
		}
	}
	for _, want := range []string{
		plainMarker + ` token=(sensitive)`, // echo's stdout
		`bad token (sensitive)`,            // its error
		`api_key=(sensitive)`,              // the URL echoed back
		`x-api-key=(sensitive)`,            // the header echoed back
		`authorization=(sensitive)`,        // a header named like a secret, with the variable in it
		`"type":"output"`,                  // outputs went through the socket
	} {
		if !strings.Contains(stream, want) {
			t.Errorf("the event socket lacks %q:\n%s", want, stream)
		}
	}
}
