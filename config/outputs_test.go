package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestHTTPActivityDiagnostics: max_response_bytes is validated and
// activity.NAME.OUTPUT names are checked against the upstream's kind, with
// body_truncated an http output.
func TestHTTPActivityDiagnostics(t *testing.T) {
	const up = `
  activity "fetch" {
    http { url = "http://127.0.0.1:1/x" }
  }
  activity "run" {
    exec { command = ["true"] }
  }
  activity "nap" {
    sleep { duration = "1s" }
  }
`
	use := func(expr string) string {
		return wrap(up + "  activity \"use\" {\n    exec { command = [\"echo\", " + expr + "] }\n  }\n")
	}
	bytesAttr := func(v string) string {
		return wrap("  activity \"a\" {\n    http {\n      url = \"http://127.0.0.1:1/\"\n      max_response_bytes = " + v + "\n    }\n  }\n")
	}
	tests := []struct {
		name    string
		src     string
		summary string
		detail  string
		at      string
	}{
		{"zero max_response_bytes", bytesAttr("0"), "Invalid max_response_bytes", "max_response_bytes must be between 1 and 67108864 (64 MiB), got 0.", "0\n"},
		{"negative max_response_bytes", bytesAttr("-1"), "Invalid max_response_bytes", "got -1.", "-1"},
		{"huge max_response_bytes", bytesAttr("1e12"), "Invalid max_response_bytes", "got 1000000000000.", "1e12"},
		{"fractional max_response_bytes", bytesAttr("1.5"), "Invalid number", "max_response_bytes must be a whole number, got 1.5.", "1.5"},
		{"string max_response_bytes", bytesAttr(`"lots"`), "Incorrect attribute value type", `Inappropriate value for attribute "max_response_bytes"`, `"lots"`},
		{"typo of an http output", use("activity.fetch.bdy"), "Unsupported attribute",
			`activity.fetch is an http activity, which has no output named "bdy". Did you mean "body"? Its outputs are status, headers, body, result, body_truncated; error says why it failed.`, ".bdy"},
		{"body_truncated of an exec activity", use("tostring(activity.run.body_truncated)"), "Unsupported attribute",
			`activity.run is an exec activity, which has no output named "body_truncated". Its outputs are result, stdout, stderr, exit_code; error says why it failed.`, ".body_truncated"},
		{"index form is checked too", use(`activity.fetch["stauts"]`), "Unsupported attribute", `Did you mean "status"?`, `["stauts"]`},
		{"sleep has no outputs", use("activity.nap.result"), "Unsupported attribute",
			"activity.nap is a sleep activity, which has no outputs (error says why it failed). To wait for it without using a value, write depends_on = [activity.nap].", ".result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := load(t, tt.src, LoadOptions{})
			errs := errorsOf(diags)
			if len(errs) != 1 {
				t.Fatalf("want one error, got %v", diags)
			}
			d := errs[0]
			if d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("got %q: %q\nwant %q: containing %q", d.Summary, d.Detail, tt.summary, tt.detail)
			}
			line, col := posOf(t, tt.src, tt.at)
			if d.Subject == nil || d.Subject.Start.Line != line || d.Subject.Start.Column != col {
				t.Errorf("subject = %v, want %d:%d", d.Subject, line, col)
			}
		})
	}

	// The valid outputs, body_truncated included, validate cleanly.
	cfg := mustLoad(t, use(`"${activity.fetch.body_truncated} ${activity.fetch.status} ${activity.run.exit_code}"`), LoadOptions{})
	if a := cfg.Workflows[0].Activity("use"); len(a.DependsOn) != 2 {
		t.Errorf("depends on %v", a.DependsOn)
	}
}

// TestTruncatedResultIsAnError: referring to result of an upstream http
// activity whose body was cut is an error naming the activity and the cap,
// at the reference; body and body_truncated stay usable.
func TestTruncatedResultIsAnError(t *testing.T) {
	src := wrap(`
  activity "fetch" {
    http {
      url                = "http://127.0.0.1:1/x"
      max_response_bytes = 4096
    }
  }
  activity "fetch_default" {
    http { url = "http://127.0.0.1:1/y" }
  }
  activity "use" {
    exec { command = ["echo", jsonencode(activity.fetch.result.items)] }
  }
  activity "use_default" {
    exec { command = ["echo", jsonencode(activity.fetch_default["result"])] }
  }
  activity "use_body" {
    exec { command = ["echo", activity.fetch.body, tostring(activity.fetch.body_truncated)] }
  }
`)
	cfg := mustLoad(t, src, LoadOptions{})
	w := cfg.Workflows[0]
	cut, err := OutputsValue(json.RawMessage(`{"status": 200, "headers": {}, "body": "{\"items\": [1, 2", "result": null, "body_truncated": true}`))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := OutputsValue(json.RawMessage(`{"status": 200, "headers": {}, "body": "{\"items\": [1]}", "result": {"items": [1]}, "body_truncated": false}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		activity, upstream string
		cap                string
		at                 string
	}{
		{"use", "fetch", "max_response_bytes of 4096 bytes", "activity.fetch.result.items"},
		{"use_default", "fetch_default", "max_response_bytes of 1048576 bytes (the default)", `activity.fetch_default["result"]`},
	}
	for _, tt := range tests {
		_, diags := w.Activity(tt.activity).Resolve(map[string]cty.Value{tt.upstream: cut})
		errs := errorsOf(diags)
		if len(errs) != 1 {
			t.Fatalf("%s: want one error, got %v", tt.activity, diags)
		}
		d := errs[0]
		if d.Summary != "Result of a truncated response body" ||
			!strings.Contains(d.Detail, "activity."+tt.upstream+".result is not available") ||
			!strings.Contains(d.Detail, tt.cap) || !strings.Contains(d.Detail, `activity "`+tt.upstream+`"`) {
			t.Errorf("%s: %s: %s", tt.activity, d.Summary, d.Detail)
		}
		line, col := posOf(t, src, tt.at)
		if d.Subject == nil || d.Subject.Start.Line != line || d.Subject.Start.Column != col {
			t.Errorf("%s: subject = %v, want %d:%d", tt.activity, d.Subject, line, col)
		}
		if _, diags := w.Activity(tt.activity).Resolve(map[string]cty.Value{tt.upstream: whole}); diags.HasErrors() {
			t.Errorf("%s with a whole body: %v", tt.activity, diags)
		}
	}
	res, diags := w.Activity("use_body").Resolve(map[string]cty.Value{"fetch": cut})
	if diags.HasErrors() {
		t.Fatalf("body of a cut response: %v", diags)
	}
	if got := res.Exec.Command; len(got) != 3 || got[1] != `{"items": [1, 2` || got[2] != "true" {
		t.Errorf("command = %q", got)
	}
}

func TestSuggest(t *testing.T) {
	outs := kindOutputs[KindHTTP]
	for in, want := range map[string]string{"bdy": "body", "stauts": "status", "body_truncate": "body_truncated", "zzz": "", "resutl": "result"} {
		if got := suggest(in, outs); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
