package activity

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// messageBodyBytes is how much of an unexpected response's body goes into
// the failure message.
const messageBodyBytes = 200

// httpOutputs is the outputs object of an http attempt that got a response.
type httpOutputs struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Result  json.RawMessage   `json:"result"`
}

// newHTTPClients returns the clients indexed by [insecure][noRedirect]. The
// insecure ones clone the base transport so they never share a TLS config
// with the verifying ones. When the base client has a custom RoundTripper
// that is not an *http.Transport there is nothing to switch off, and the
// insecure clients keep verifying: failing closed is the safe way to be
// wrong.
func newHTTPClients(base *http.Client) [2][2]*http.Client {
	if base == nil {
		var tr *http.Transport
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			tr = dt.Clone()
		} else {
			tr = &http.Transport{Proxy: http.ProxyFromEnvironment}
		}
		base = &http.Client{Transport: tr}
	}
	secure := base
	twin := *base
	insecure := &twin
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if t, ok := rt.(*http.Transport); ok {
		c := t.Clone()
		if c.TLSClientConfig == nil {
			c.TLSClientConfig = &tls.Config{}
		}
		c.TLSClientConfig.InsecureSkipVerify = true
		insecure.Transport = c
	}
	return [2][2]*http.Client{
		{secure, noRedirects(secure)},
		{insecure, noRedirects(insecure)},
	}
}

// noRedirects returns a copy of c that hands back a redirect response
// instead of following it.
func noRedirects(c *http.Client) *http.Client {
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// wantsRedirect reports whether expect lists a 3xx status: then the user
// wants to see the redirect itself, not where it leads.
func wantsRedirect(expect []int) bool {
	for _, c := range expect {
		if c >= 300 && c <= 399 {
			return true
		}
	}
	return false
}

// runHTTP performs one http attempt.
func (r *Runner) runHTTP(ctx context.Context, req Request) (any, *Failure) {
	spec := req.Spec.HTTP
	method := spec.Method
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.Parse(spec.URL)
	if err != nil {
		return struct{}{}, &Failure{Type: TypeHTTPInvalidRequest, Message: fmt.Sprintf("parse url: %v", err), NonRetryable: true}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return struct{}{}, &Failure{Type: TypeHTTPInvalidRequest, Message: fmt.Sprintf("url %q: want an absolute http:// or https:// URL", spec.URL), NonRetryable: true}
	}

	actx, cancel := attemptContext(ctx, req.Timeout)
	defer cancel()

	var body io.Reader
	if spec.Body != "" {
		body = strings.NewReader(spec.Body)
	}
	hreq, err := http.NewRequestWithContext(actx, method, spec.URL, body)
	if err != nil {
		return struct{}{}, &Failure{Type: TypeHTTPInvalidRequest, Message: fmt.Sprintf("build request: %v", err), NonRetryable: true}
	}
	for k, v := range spec.Headers {
		if strings.EqualFold(k, "Host") {
			// net/http ignores a Host header field; the Host goes here.
			hreq.Host = v
			continue
		}
		hreq.Header.Set(k, v)
	}
	if req.IdempotencyKey != "" && !hasHeader(spec.Headers, "Idempotency-Key") {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	if !hasHeader(spec.Headers, "User-Agent") {
		hreq.Header.Set("User-Agent", "wf")
	}

	client := r.clients[b2i(spec.InsecureSkipVerify)][b2i(wantsRedirect(spec.ExpectStatus))]
	resp, err := client.Do(hreq)
	if err != nil {
		return struct{}{}, httpErrorFailure(ctx, actx, req.Timeout, "", err)
	}
	// Closing an unread body drops the connection instead of draining it,
	// which is what a truncated (possibly endless) body needs.
	defer resp.Body.Close()

	out := &httpOutputs{Status: resp.StatusCode, Headers: make(map[string]string, len(resp.Header))}
	for k, vs := range resp.Header {
		out.Headers[k] = strings.Join(vs, ", ")
	}

	data, err := io.ReadAll(io.LimitReader(resp.Body, r.maxOutput))
	out.Body = string(data)
	if err != nil {
		return out, httpErrorFailure(ctx, actx, req.Timeout, "read body: ", err)
	}
	truncated := false
	if int64(len(data)) == r.maxOutput {
		var one [1]byte
		n, _ := io.ReadFull(resp.Body, one[:])
		truncated = n > 0
	}
	out.Result = parseJSONResult(data, truncated)
	note := ""
	if truncated {
		note = fmt.Sprintf("body truncated to the first %d bytes", len(data))
	}

	if expectedStatus(spec.ExpectStatus, resp.StatusCode) {
		return out, nil
	}
	msg := resp.Proto + " " + resp.Status
	if b := strings.TrimSpace(firstBytes(data, messageBodyBytes)); b != "" {
		msg += ": " + b
	}
	f := &Failure{Type: "http:" + strconv.Itoa(resp.StatusCode), Message: joinNotes(msg, note)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), r.now()); ok {
			f.RetryAfter, f.HasRetryAfter = d, true
		}
	}
	return out, f
}

// httpErrorFailure types an error from sending the request or reading the
// response: the caller's cancellation wins, then the attempt's own deadline,
// and everything else means the server could not be talked to.
func httpErrorFailure(ctx, actx context.Context, timeout time.Duration, prefix string, err error) *Failure {
	switch {
	case ctx.Err() != nil:
		return &Failure{Type: TypeInterrupted, Message: "cancelled while the request was in flight"}
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		return &Failure{Type: TypeTimeout, Message: fmt.Sprintf("%stimed out after %s", prefix, timeout)}
	}
	// A Timeout() error with the attempt's deadline not reached comes from
	// the base client's own Timeout or a transport deadline.
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return &Failure{Type: TypeTimeout, Message: prefix + err.Error()}
	}
	return &Failure{Type: TypeHTTPConnection, Message: prefix + err.Error()}
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// expectedStatus reports whether code is accepted: listed in expect, or any
// 2xx when expect is empty.
func expectedStatus(expect []int, code int) bool {
	if len(expect) == 0 {
		return code >= 200 && code <= 299
	}
	for _, c := range expect {
		if c == code {
			return true
		}
	}
	return false
}

// maxRetryAfterSeconds keeps a delta-seconds value inside time.Duration.
const maxRetryAfterSeconds = int64(1<<63-1) / int64(time.Second)

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): delay
// seconds or an HTTP-date, the latter relative to now; a date in the past
// means no wait. ok is false when the header is absent or unparsable.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > maxRetryAfterSeconds {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
