package activity

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
)

// The doc comment of Failure promises a direct conversion; this keeps the
// two structs in step.
var _ = retry.Failure(Failure{})

type panicTransport struct{}

func (panicTransport) RoundTrip(*http.Request) (*http.Response, error) {
	panic("transport exploded")
}

func TestRunRecoversPanics(t *testing.T) {
	r := newTestRunner(t, Options{HTTPClient: &http.Client{Transport: panicTransport{}}})
	for _, insecure := range []bool{false, true} {
		res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: "http://127.0.0.1:1/", InsecureSkipVerify: insecure}))
		if res.Failure == nil || res.Failure.Type != TypeInternal {
			t.Fatalf("failure = %+v, want %s", res.Failure, TypeInternal)
		}
		if !strings.Contains(res.Failure.Message, "transport exploded") {
			t.Errorf("message %q does not carry the panic value", res.Failure.Message)
		}
		if string(res.Outputs) != "{}" || res.End.Before(res.Start) {
			t.Errorf("outputs %s, start %v, end %v", res.Outputs, res.Start, res.End)
		}
	}
}

func TestParseJSONResult(t *testing.T) {
	tests := []struct {
		in        string
		truncated bool
		want      string // "" = nil
	}{
		{in: `{"a":1}`, want: `{"a":1}`},
		{in: " \n\t[1]\r\n", want: `[1]`},
		{in: `"s"`, want: `"s"`},
		{in: `null`, want: `null`},
		{in: ``, want: ``},
		{in: `   `, want: ``},
		{in: `{"a":`, want: ``},
		{in: `1 2`, want: ``},
		{in: `12`, truncated: true, want: ``},
	}
	for _, tt := range tests {
		got := parseJSONResult([]byte(tt.in), tt.truncated)
		if string(got) != tt.want || (tt.want == "" && got != nil) {
			t.Errorf("parseJSONResult(%q, %v) = %q, want %q", tt.in, tt.truncated, got, tt.want)
		}
	}
}

func TestFirstBytes(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "hel"},
		{"h€llo", 2, "h"}, // € is 3 bytes: not cut in half
		{"h€llo", 4, "h€"},
		{"a\xffb", 10, "a\uFFFDb"},
	}
	for _, tt := range tests {
		if got := firstBytes([]byte(tt.in), tt.n); got != tt.want {
			t.Errorf("firstBytes(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
