package config

import (
	"encoding/json"
	"strings"
	"testing"
)

const secret = "hunter2-secret"

// TestSensitiveTaint: a sensitive variable's value and everything derived
// from it are listed in Resolved.Sensitive (never part of the hash's
// input as metadata), query parameters and headers named like secrets too,
// and diagnostics quoting a bad value do not quote a secret.
func TestSensitiveTaint(t *testing.T) {
	cfg := mustLoad(t, `
variable "token" {
  default   = "`+secret+`"
  sensitive = true
}
variable "plain" { default = "visible" }
locals { auth = "Bearer ${var.token}" }
`+wrap(`
  activity "call" {
    http {
      url     = "http://127.0.0.1:1/x?api_key=k-12345&page=2"
      headers = { Authorization = local.auth, "X-Plain" = var.plain }
    }
  }
  activity "run" {
    exec {
      command = ["./x", upper(var.token), var.plain]
      env     = { T = substr(var.token, 0, 7) }
    }
  }
`), LoadOptions{})
	if len(cfg.Sensitive) != 1 || cfg.Sensitive[0] != secret || cfg.Workflows[0].Sensitive[0] != secret {
		t.Fatalf("config secrets %v", cfg.Sensitive)
	}
	w := cfg.Workflows[0]
	res, diags := w.Activity("call").Resolve(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := strings.Join(res.Sensitive, "|")
	for _, want := range []string{"Bearer " + secret, secret, "k-12345"} {
		if !strings.Contains("|"+got+"|", "|"+want+"|") {
			t.Errorf("call: %q not in %q", want, got)
		}
	}
	if strings.Contains(got, "visible") || strings.Contains(got, "page") {
		t.Errorf("call: plain values listed: %q", got)
	}
	if res.HTTP.Headers["Authorization"] != "Bearer "+secret {
		t.Errorf("the request itself carries the secret: %v", res.HTTP.Headers)
	}
	res, _ = w.Activity("run").Resolve(nil)
	got = strings.Join(res.Sensitive, "|")
	if !strings.Contains(got, strings.ToUpper(secret)) || !strings.Contains(got, secret[:7]) || strings.Contains(got, "visible") {
		t.Errorf("run: %q", got)
	}
	// The secret never enters the hash as anything but the definition.
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), "Sensitive") {
		t.Errorf("Sensitive is encoded: %s", b)
	}

	// A diagnostic about a bad value derived from a secret hides it.
	_, d := load(t, "variable \"token\" {\n  default = \"not a url "+secret+"\"\n  sensitive = true\n}\n"+wrap("  activity \"a\" {\n    http { url = var.token }\n  }\n"), LoadOptions{})
	var sb strings.Builder
	_ = WriteDiagnostics(&sb, d, nil, false)
	if !d.HasErrors() || strings.Contains(sb.String(), secret) || !strings.Contains(sb.String(), Redacted) {
		t.Errorf("diagnostic shows the secret:\n%s", sb.String())
	}

	// An instance key shows everywhere: it cannot be a secret.
	_, d = load(t, "variable \"token\" {\n  default = \"x\"\n  sensitive = true\n}\nworkflow \"w\" {\n  key = \"k-${var.token}\"\n}\n", LoadOptions{})
	if errs := errorsOf(d); len(errs) != 1 || errs[0].Summary != "Sensitive value not allowed" {
		t.Errorf("sensitive key: %v", d)
	}
	// The configuration hash still covers the value.
	a := mustLoad(t, "variable \"t\" {\n  sensitive = true\n}\n", LoadOptions{Vars: []string{"t=one"}})
	b2 := mustLoad(t, "variable \"t\" {\n  sensitive = true\n}\n", LoadOptions{Vars: []string{"t=two"}})
	if a.Hash == b2.Hash {
		t.Error("a sensitive variable's value is not in the configuration hash")
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor([]string{secret, "abc", `q"uo<te>`}, []string{secret})
	if got := r.String("x " + secret + " y abc"); got != "x (sensitive) y abc" {
		t.Errorf("String: %q (secrets under MinRedacted stay)", got)
	}
	in, _ := json.Marshal(map[string]any{"stdout": "token=" + secret + "\n", "result": map[string]any{"k": `q"uo<te>`}, "n": 1})
	out := string(r.JSON(in))
	if strings.Contains(out, secret) || strings.Contains(out, `uo\u003cte`) || !json.Valid([]byte(out)) || !strings.Contains(out, `"n":1`) {
		t.Errorf("JSON: %s", out)
	}
	// A secret that is a number inside the document: the document stays
	// valid, the strings are redacted.
	r = NewRedactor([]string{"12345"})
	out = string(r.JSON([]byte(`{"a":12345,"b":"x12345x"}`)))
	if !json.Valid([]byte(out)) || strings.Contains(out, `"x12345x"`) {
		t.Errorf("number secret: %s", out)
	}
	var nilR *Redactor
	if nilR.String("a") != "a" || string(nilR.JSON([]byte("{}"))) != "{}" || NewRedactor([]string{"ab"}) != nil {
		t.Error("nil redactor")
	}
}

// TestDiagnosticsHideSecrets: a diagnostic quoting a value evaluated
// anywhere (here an enum) says (sensitive) instead.
func TestDiagnosticsHideSecrets(t *testing.T) {
	_, diags := load(t, "variable \"b\" {\n  default   = \"expo-"+secret+"\"\n  sensitive = true\n}\nretry_policy \"p\" {\n  maximum_attempts = 2\n  backoff = var.b\n}\n", LoadOptions{})
	if !diags.HasErrors() || strings.Contains(diags.Error(), secret) || !strings.Contains(diags.Error(), Redacted) {
		t.Errorf("diagnostics: %v", diags)
	}
}
