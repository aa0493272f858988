package activity

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
)

func httpReq(spec config.HTTPSpec) Request {
	return Request{
		Workflow: "order", Instance: "order-1", Activity: "ship", Attempt: 2,
		IdempotencyKey: "wf1-key",
		Spec:           &config.Resolved{HTTP: &spec},
	}
}

// recorded is what a test server saw.
type recorded struct {
	method string
	body   string
	header http.Header
	host   string
}

func recordingServer(t *testing.T) (*httptest.Server, func() recorded) {
	t.Helper()
	var mu sync.Mutex
	var got recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = recorded{method: r.Method, body: string(b), header: r.Header.Clone(), host: r.Host}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() recorded {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

func TestHTTPRequest(t *testing.T) {
	tests := []struct {
		name       string
		spec       config.HTTPSpec
		key        string
		wantMethod string
		wantBody   string
		wantHeader map[string][]string
		wantHost   string
	}{
		{name: "defaults", key: "wf1-key", wantMethod: "GET",
			wantHeader: map[string][]string{"Idempotency-Key": {"wf1-key"}, "User-Agent": {"wf"}}},
		{name: "post with body and headers", key: "wf1-key",
			spec:       config.HTTPSpec{Method: "POST", Body: `{"order":"1001"}`, Headers: map[string]string{"Content-Type": "application/json", "X-Trace": "abc"}},
			wantMethod: "POST", wantBody: `{"order":"1001"}`,
			wantHeader: map[string][]string{"Idempotency-Key": {"wf1-key"}, "Content-Type": {"application/json"}, "X-Trace": {"abc"}}},
		{name: "configured idempotency key wins, any case", key: "wf1-key",
			spec:       config.HTTPSpec{Method: "PUT", Headers: map[string]string{"idempotency-key": "mine"}},
			wantMethod: "PUT", wantHeader: map[string][]string{"Idempotency-Key": {"mine"}}},
		{name: "configured user agent wins", key: "wf1-key",
			spec:       config.HTTPSpec{Headers: map[string]string{"user-agent": "billing/2"}},
			wantMethod: "GET", wantHeader: map[string][]string{"User-Agent": {"billing/2"}}},
		{name: "no key, no header", key: "",
			wantMethod: "GET", wantHeader: map[string][]string{"Idempotency-Key": nil}},
		{name: "host header", key: "k",
			spec:       config.HTTPSpec{Headers: map[string]string{"Host": "api.example.com"}},
			wantMethod: "GET", wantHost: "api.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := recordingServer(t)
			r := newTestRunner(t, Options{})
			spec := tt.spec
			spec.URL = srv.URL + "/ship"
			req := httpReq(spec)
			req.IdempotencyKey = tt.key
			res := r.Run(context.Background(), req)
			if res.Failure != nil {
				t.Fatalf("failure %+v", *res.Failure)
			}
			g := got()
			if g.method != tt.wantMethod || g.body != tt.wantBody {
				t.Errorf("server saw %s %q, want %s %q", g.method, g.body, tt.wantMethod, tt.wantBody)
			}
			for k, want := range tt.wantHeader {
				if gotV := g.header.Values(k); strings.Join(gotV, "|") != strings.Join(want, "|") {
					t.Errorf("header %s = %q, want %q", k, gotV, want)
				}
			}
			if tt.wantHost != "" && g.host != tt.wantHost {
				t.Errorf("host = %q, want %q", g.host, tt.wantHost)
			}
		})
	}
}

func TestHTTPOutputs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		switch r.URL.Path {
		case "/json":
			io.WriteString(w, ` {"id": "ch_1", "amount": 12.5} `)
		case "/text":
			io.WriteString(w, "plain text")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	tests := []struct {
		path       string
		wantStatus float64
		wantBody   string
		wantResult any
	}{
		{"/json", 200, ` {"id": "ch_1", "amount": 12.5} `, map[string]any{"id": "ch_1", "amount": 12.5}},
		{"/text", 200, "plain text", nil},
		{"/empty", 204, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := newTestRunner(t, Options{})
			res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL + tt.path}))
			if res.Failure != nil {
				t.Fatalf("failure %+v", *res.Failure)
			}
			out := decodeOutputs(t, res.Outputs)
			if out["status"] != tt.wantStatus || out["body"] != tt.wantBody {
				t.Errorf("outputs = %s", res.Outputs)
			}
			headers, _ := out["headers"].(map[string]any)
			if headers["X-Multi"] != "a, b" {
				t.Errorf("headers = %v, want X-Multi joined", headers)
			}
			gotR, _ := json.Marshal(out["result"])
			wantR, _ := json.Marshal(tt.wantResult)
			if string(gotR) != string(wantR) {
				t.Errorf("result = %s, want %s", gotR, wantR)
			}
		})
	}
}

func TestHTTPStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	longBody := strings.Repeat("x", 150) + strings.Repeat("y", 150)
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		expect     []int
		wantType   string // "" = success
		wantMsg    []string
		notInMsg   string
		retryAfter time.Duration
		hasRA      bool
	}{
		{name: "200 default", status: 200},
		{name: "299 default", status: 299},
		{name: "201 listed", status: 201, expect: []int{200, 201}},
		{name: "302 listed is not followed", status: 302, expect: []int{302}, header: map[string]string{"Location": "/elsewhere"}},
		{name: "200 not listed", status: 200, expect: []int{201}, wantType: "http:200"},
		{name: "404", status: 404, body: "no such order", wantType: "http:404", wantMsg: []string{"HTTP/1.1 404 Not Found", "no such order"}},
		{name: "409 listed", status: 409, expect: []int{200, 409}},
		{name: "500 body capped in message", status: 500, body: longBody, wantType: "http:500",
			wantMsg: []string{"500 Internal Server Error: " + longBody[:200]}, notInMsg: longBody[:201]},
		{name: "429 retry-after seconds", status: 429, header: map[string]string{"Retry-After": "7"},
			wantType: "http:429", retryAfter: 7 * time.Second, hasRA: true},
		{name: "503 retry-after date", status: 503, header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)},
			wantType: "http:503", retryAfter: 90 * time.Second, hasRA: true},
		{name: "503 retry-after past date", status: 503, header: map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)},
			wantType: "http:503", retryAfter: 0, hasRA: true},
		{name: "429 retry-after garbage", status: 429, header: map[string]string{"Retry-After": "soon"}, wantType: "http:429"},
		{name: "429 retry-after negative", status: 429, header: map[string]string{"Retry-After": "-5"}, wantType: "http:429"},
		// Retry-After counts on any failed response, whatever its status.
		{name: "500 retry-after honoured", status: 500, header: map[string]string{"Retry-After": "7"},
			wantType: "http:500", retryAfter: 7 * time.Second, hasRA: true},
		{name: "413 retry-after honoured", status: 413, header: map[string]string{"Retry-After": "120"},
			wantType: "http:413", retryAfter: 2 * time.Minute, hasRA: true},
		{name: "400 retry-after date honoured", status: 400, header: map[string]string{"Retry-After": now.Add(time.Hour).Format(http.TimeFormat)},
			wantType: "http:400", retryAfter: time.Hour, hasRA: true},
		{name: "200 unexpected with retry-after", status: 200, expect: []int{201}, header: map[string]string{"Retry-After": "3"},
			wantType: "http:200", retryAfter: 3 * time.Second, hasRA: true},
		{name: "429 retry-after of 292 years is passed on for the policy to cap", status: 429, header: map[string]string{"Retry-After": "9223372036"},
			wantType: "http:429", retryAfter: 9223372036 * time.Second, hasRA: true},
		{name: "503 retry-after beyond time.Duration saturates", status: 503, header: map[string]string{"Retry-After": "99999999999999999999999"},
			wantType: "http:503", retryAfter: maxDuration, hasRA: true},
		{name: "503 retry-after date in year 9999 saturates", status: 503, header: map[string]string{"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
			wantType: "http:503", retryAfter: maxDuration, hasRA: true},
		{name: "success ignores retry-after", status: 200, header: map[string]string{"Retry-After": "7"}},
		{name: "429 without retry-after", status: 429, wantType: "http:429"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			r := newTestRunner(t, Options{Now: func() time.Time { return now }})
			res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL, ExpectStatus: tt.expect}))
			if !res.Start.Equal(now) || !res.End.Equal(now) {
				t.Errorf("start/end = %v/%v, want the injected clock", res.Start, res.End)
			}
			out := decodeOutputs(t, res.Outputs)
			if out["status"] != float64(tt.status) {
				t.Errorf("status output = %v, want %d", out["status"], tt.status)
			}
			if tt.wantType == "" {
				if res.Failure != nil {
					t.Fatalf("failure %+v", *res.Failure)
				}
				return
			}
			f := res.Failure
			if f == nil || f.Type != tt.wantType {
				t.Fatalf("failure = %+v, want %s", f, tt.wantType)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(f.Message, s) {
					t.Errorf("message %q does not contain %q", f.Message, s)
				}
			}
			if tt.notInMsg != "" && strings.Contains(f.Message, tt.notInMsg) {
				t.Errorf("message carries more than %d bytes of body", messageBodyBytes)
			}
			if f.NonRetryable {
				t.Error("status failures are typed, not flagged non-retryable")
			}
			if f.HasRetryAfter != tt.hasRA || f.RetryAfter != tt.retryAfter {
				t.Errorf("retry after = %v/%v, want %v/%v", f.RetryAfter, f.HasRetryAfter, tt.retryAfter, tt.hasRA)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 120 ", 2 * time.Minute, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", maxDuration, true},
		{"99999999999999999999", maxDuration, true},
		{"1.5", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"5s", 0, false},
		{"1e3", 0, false},
		{"Fri, 31 Dec 9999 23:59:59 GMT", maxDuration, true},
		{"Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sunday, 01-Mar-26 12:01:00 GMT", time.Minute, true}, // RFC 850
		{"Sun Mar  1 12:00:10 2026", 10 * time.Second, true},  // asctime
		{"Sat, 28 Feb 2026 12:00:00 GMT", 0, true},
		{"tomorrow", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestHTTPErrors(t *testing.T) {
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/"
	}
	hanging := func(t *testing.T) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	stallingBody := func(t *testing.T) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(200)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	reset := func(t *testing.T) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with RST
			}
			conn.Close()
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	fixed := func(u string) func(*testing.T) string { return func(*testing.T) string { return u } }

	tests := []struct {
		name         string
		url          func(*testing.T) string
		method       string
		timeout      time.Duration
		wantType     string
		nonRetryable bool
		maxTook      time.Duration
		// wantMessage, when set, is how the message begins: what is
		// wrong with a request that cannot be built, the URL first.
		wantMessage string
	}{
		{name: "connection refused", url: refused, wantType: TypeHTTPConnection},
		{name: "connection reset", url: reset, wantType: TypeHTTPConnection},
		{name: "timeout waiting for headers", url: hanging, timeout: 300 * time.Millisecond, wantType: TypeTimeout, maxTook: 2 * time.Second},
		{name: "timeout reading body", url: stallingBody, timeout: 300 * time.Millisecond, wantType: TypeTimeout, maxTook: 2 * time.Second},
		{name: "relative url", url: fixed("/ship"), wantType: TypeHTTPInvalidRequest, nonRetryable: true, wantMessage: `url "/ship": want an absolute`},
		{name: "unsupported scheme", url: fixed("ftp://example.com/x"), wantType: TypeHTTPInvalidRequest, nonRetryable: true, wantMessage: `url "ftp://example.com/x": want an absolute`},
		{name: "unparsable url", url: fixed("http://[::1"), wantType: TypeHTTPInvalidRequest, nonRetryable: true, wantMessage: "parse url: "},
		{name: "bad method", url: fixed("http://127.0.0.1:1/"), method: "GET /", wantType: TypeHTTPInvalidRequest, nonRetryable: true, wantMessage: "build request: "},
		{name: "bad method and unsupported scheme", url: fixed("ftp://example.com/x"), method: "GET /", wantType: TypeHTTPInvalidRequest, nonRetryable: true, wantMessage: `url "ftp://example.com/x": want an absolute`},
		{name: "bad method and unparsable url", url: fixed("http://[::1"), method: "GET /", wantType: TypeHTTPInvalidRequest, nonRetryable: true, wantMessage: "parse url: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{})
			req := httpReq(config.HTTPSpec{URL: tt.url(t), Method: tt.method})
			req.Timeout = tt.timeout
			begin := time.Now()
			res := r.Run(context.Background(), req)
			if tt.maxTook > 0 && time.Since(begin) > tt.maxTook {
				t.Errorf("Run took %v", time.Since(begin))
			}
			if res.Failure == nil || res.Failure.Type != tt.wantType {
				t.Fatalf("failure = %+v, want %s", res.Failure, tt.wantType)
			}
			if res.Failure.NonRetryable != tt.nonRetryable {
				t.Errorf("NonRetryable = %v", res.Failure.NonRetryable)
			}
			if res.Failure.Message == "" {
				t.Error("empty message")
			}
			if !strings.HasPrefix(res.Failure.Message, tt.wantMessage) {
				t.Errorf("message %q, want it to begin with %q", res.Failure.Message, tt.wantMessage)
			}
			decodeOutputs(t, res.Outputs)
		})
	}
}

func TestHTTPCancelInterrupts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	r := newTestRunner(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(200*time.Millisecond, cancel)
	defer timer.Stop()
	req := httpReq(config.HTTPSpec{URL: srv.URL})
	req.Timeout = time.Minute
	begin := time.Now()
	res := r.Run(ctx, req)
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("Run took %v after cancellation", took)
	}
	if res.Failure == nil || res.Failure.Type != TypeInterrupted {
		t.Fatalf("failure = %+v, want interrupted", res.Failure)
	}
}

func TestHTTPHugeBodyIsCapped(t *testing.T) {
	const total = 50 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("z", 64<<10))
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client hung up once it had enough
			}
		}
	}))
	defer srv.Close()
	r := newTestRunner(t, Options{})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	begin := time.Now()
	res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL}))
	took := time.Since(begin)
	runtime.ReadMemStats(&after)

	if took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	out := decodeOutputs(t, res.Outputs)
	if n := len(out["body"].(string)); int64(n) != DefaultMaxOutput {
		t.Errorf("len(body) = %d, want the cap %d", n, DefaultMaxOutput)
	}
	if out["result"] != nil {
		t.Errorf("result = %v, want null for a truncated body", out["result"])
	}
	// The whole 50 MiB must never be buffered: allow the kept MiB a few
	// times over (string copies, JSON encoding, test decoding) and no more.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("Run allocated %d MiB for a 1 MiB cap", alloc>>20)
	}
}

func TestHTTPTruncationNotedOnFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
		io.WriteString(w, strings.Repeat("e", 5000))
	}))
	defer srv.Close()
	r := newTestRunner(t, Options{MaxOutput: 100})
	res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL}))
	if res.Failure == nil || res.Failure.Type != "http:502" {
		t.Fatalf("failure = %+v", res.Failure)
	}
	if !strings.Contains(res.Failure.Message, "body truncated to the first 100 bytes") {
		t.Errorf("message %q does not note the truncation", res.Failure.Message)
	}
	if out := decodeOutputs(t, res.Outputs); len(out["body"].(string)) != 100 {
		t.Errorf("body length = %d", len(out["body"].(string)))
	}
}

func TestHTTPInsecureSkipVerify(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"tls": true}`)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are the point
	srv.StartTLS()
	defer srv.Close()
	tests := []struct {
		name     string
		insecure bool
		wantType string
	}{
		{name: "verified by default", insecure: false, wantType: TypeHTTPConnection},
		{name: "skip verify", insecure: true},
		// The insecure client must not have weakened the verifying one.
		{name: "still verified afterwards", insecure: false, wantType: TypeHTTPConnection},
	}
	r := newTestRunner(t, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL, InsecureSkipVerify: tt.insecure}))
			if tt.wantType == "" {
				if res.Failure != nil {
					t.Fatalf("failure %+v", *res.Failure)
				}
				return
			}
			if res.Failure == nil || res.Failure.Type != tt.wantType {
				t.Fatalf("failure = %+v, want %s", res.Failure, tt.wantType)
			}
			if !strings.Contains(res.Failure.Message, "certificate") {
				t.Errorf("message %q does not mention the certificate", res.Failure.Message)
			}
		})
	}
}

func TestRunInvalidSpec(t *testing.T) {
	tests := []struct {
		name string
		spec *config.Resolved
	}{
		{"nil spec", nil},
		{"empty spec", &config.Resolved{}},
		{"sleep", &config.Resolved{Sleep: &config.SleepSpec{Duration: time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{})
			res := r.Run(context.Background(), Request{Spec: tt.spec})
			if res.Failure == nil || res.Failure.Type != TypeInvalidSpec || !res.Failure.NonRetryable {
				t.Fatalf("failure = %+v, want non-retryable %s", res.Failure, TypeInvalidSpec)
			}
			if string(res.Outputs) != "{}" {
				t.Errorf("outputs = %s, want {}", res.Outputs)
			}
		})
	}
}

func TestHTTPRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new", http.StatusFound)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `"moved"`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tests := []struct {
		name       string
		expect     []int
		wantStatus float64
	}{
		{name: "followed by default", wantStatus: 200},
		{name: "kept when a 3xx is expected", expect: []int{200, 302}, wantStatus: 302},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{})
			res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL + "/old", ExpectStatus: tt.expect}))
			if res.Failure != nil {
				t.Fatalf("failure %+v", *res.Failure)
			}
			if out := decodeOutputs(t, res.Outputs); out["status"] != tt.wantStatus {
				t.Errorf("status = %v, want %v", out["status"], tt.wantStatus)
			}
		})
	}
}
