package activity

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/wf-engine/wf/config"
)

// TestHTTPMaxResponseBytes: a body beyond max_response_bytes (default
// 1 MiB) is cut, body_truncated says so and result is null; a body that
// fits is whole, with body_truncated false.
func TestHTTPMaxResponseBytes(t *testing.T) {
	bigJSON := `{"items": [` + strings.Repeat(`"xxxxxxxxxx",`, 100_000) + `"end"]}` // ~1.2 MB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		switch r.URL.Path {
		case "/big":
			io.WriteString(w, bigJSON)
		case "/bytes":
			io.WriteString(w, strings.Repeat("a", n))
		}
	}))
	defer srv.Close()
	tests := []struct {
		name          string
		path          string
		limit         int64
		wantBodyLen   int
		wantTruncated bool
		wantResult    bool
	}{
		{name: "1.2 MB JSON over the default cap", path: "/big", wantBodyLen: int(config.DefaultMaxResponseBytes), wantTruncated: true},
		{name: "1.2 MB JSON under a raised cap", path: "/big", limit: 2 << 20, wantBodyLen: len(bigJSON), wantResult: true},
		{name: "exactly the cap is whole", path: "/bytes?n=100", limit: 100, wantBodyLen: 100},
		{name: "one byte over the cap", path: "/bytes?n=101", limit: 100, wantBodyLen: 100, wantTruncated: true},
		{name: "small body", path: "/bytes?n=3", wantBodyLen: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{})
			res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL + tt.path, MaxResponseBytes: tt.limit}))
			if res.Failure != nil {
				t.Fatalf("failure %+v", *res.Failure)
			}
			out := decodeOutputs(t, res.Outputs)
			if got := len(out["body"].(string)); got != tt.wantBodyLen {
				t.Errorf("len(body) = %d, want %d", got, tt.wantBodyLen)
			}
			if tr, ok := out["body_truncated"].(bool); !ok || tr != tt.wantTruncated {
				t.Errorf("body_truncated = %v, want %v (always present)", out["body_truncated"], tt.wantTruncated)
			}
			if (out["result"] != nil) != tt.wantResult {
				t.Errorf("result present = %v, want %v", out["result"] != nil, tt.wantResult)
			}
		})
	}
}

// TestHTTPTooManyRedirects: a chain longer than the 10 redirects an http
// activity follows is http:too_many_redirects with the count in the
// message, not a connection error; 10 redirects are still followed.
func TestHTTPTooManyRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n <= 1 {
			http.Redirect(w, r, "/done", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/done", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `"arrived"`) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r := newTestRunner(t, Options{})

	res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL + "/redirect/10"}))
	if res.Failure != nil {
		t.Fatalf("10 redirects: failure %+v", *res.Failure)
	}
	if out := decodeOutputs(t, res.Outputs); out["result"] != "arrived" {
		t.Errorf("10 redirects: outputs %s", res.Outputs)
	}

	res = r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL + "/redirect/11"}))
	f := res.Failure
	if f == nil || f.Type != "http:too_many_redirects" {
		t.Fatalf("11 redirects: failure = %+v, want http:too_many_redirects", f)
	}
	if !strings.Contains(f.Message, "stopped after 10 redirects") || !strings.Contains(f.Message, "/done") {
		t.Errorf("message %q does not give the count and where it was going", f.Message)
	}
	if f.NonRetryable {
		t.Error("too many redirects is left to the retry policy")
	}
}
