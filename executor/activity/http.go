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

// maxRedirects is how many redirects an http activity follows before it
// fails with TypeHTTPTooManyRedirects (curl's and browsers' order of
// magnitude; net/http's default stops one earlier, after 10 requests).
const maxRedirects = 10

// httpOutputs is the outputs object of an http attempt that got a response.
type httpOutputs struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Result  json.RawMessage   `json:"result"`
	// BodyTruncated says Body holds only the first max_response_bytes of
	// the response; Result is then null, and config refuses references to
	// it instead of handing a downstream activity a silent null.
	BodyTruncated bool `json:"body_truncated"`

	// own holds the values of the request header fields wf adds
	// (Idempotency-Key, User-Agent): allocated with the outputs, not
	// apart. Not an output.
	own [2]string
}

// tooManyRedirects is the CheckRedirect error that stops a redirect chain.
type tooManyRedirects struct {
	count int
	next  string
}

func (e *tooManyRedirects) Error() string {
	return fmt.Sprintf("stopped after %d redirects: the server redirected again, to %s (an http activity follows at most %d)", e.count, e.next, maxRedirects)
}

// defaultConnsPerHost sizes the connection pool when Options.Parallelism
// is zero: wf apply's default -parallelism.
const defaultConnsPerHost = 10

// newHTTPClients returns the clients indexed by [insecure][noRedirect].
//
// Without a base client, all of them share one transport per TLS mode,
// cloned from http.DefaultTransport but keeping up to connsPerHost idle
// connections per host: the default keeps 2, so with 100 requests at once
// to one host 98 of every 100 connections were closed after their
// response and the next attempt paid a new TCP (and TLS) handshake. The
// pool can never hold more idle connections than requests ran at once, so
// sizing it to the parallelism costs nothing when fewer run.
//
// The insecure ones clone the base transport so they never share a TLS
// config with the verifying ones. When the base client has a custom
// RoundTripper that is not an *http.Transport there is nothing to switch
// off, and the insecure clients keep verifying: failing closed is the safe
// way to be wrong. A base client's transport is the caller's and is not
// resized.
func newHTTPClients(base *http.Client, connsPerHost int) [2][2]*http.Client {
	if connsPerHost <= 0 {
		connsPerHost = defaultConnsPerHost
	}
	if base == nil {
		var tr *http.Transport
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			tr = dt.Clone()
		} else {
			tr = &http.Transport{Proxy: http.ProxyFromEnvironment}
		}
		tr.MaxIdleConnsPerHost = connsPerHost
		if tr.MaxIdleConns != 0 && tr.MaxIdleConns < connsPerHost {
			tr.MaxIdleConns = connsPerHost
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
		{limitRedirects(secure), noRedirects(secure)},
		{limitRedirects(insecure), noRedirects(insecure)},
	}
}

// closeIdle closes the idle connections of the Runner's transports.
func closeIdle(clients [2][2]*http.Client) {
	for _, row := range clients {
		for _, c := range row {
			c.CloseIdleConnections()
		}
	}
}

// limitRedirects returns a copy of c that follows at most maxRedirects
// redirects and then fails with *tooManyRedirects, so that the failure is
// typed http:too_many_redirects rather than a connection error. A
// CheckRedirect of the base client still runs for the redirects it allows.
func limitRedirects(c *http.Client) *http.Client {
	nc := *c
	prev := c.CheckRedirect
	nc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// via holds the requests made so far: the first one and one per
		// redirect followed.
		if followed := len(via) - 1; followed >= maxRedirects {
			return &tooManyRedirects{count: followed, next: req.URL.Redacted()}
		}
		if prev != nil {
			return prev(req, via)
		}
		return nil
	}
	return &nc
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

	// Without a timeout the attempt's context is the caller's: a context
	// of its own would only register with (and lock) the run's, shared by
	// every attempt in flight.
	actx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = attemptContext(ctx, req.Timeout)
		defer cancel()
	}

	var body io.Reader
	if spec.Body != "" {
		body = strings.NewReader(spec.Body)
	}
	// The request parses the URL; it is parsed on its own only to say
	// what is wrong with a request that cannot be built, so that a bad
	// URL is reported as such before a bad method (and a URL is parsed
	// once per attempt, not twice).
	hreq, err := http.NewRequestWithContext(actx, method, spec.URL, body)
	if err != nil {
		if f := invalidURL(spec.URL); f != nil {
			return struct{}{}, f
		}
		return struct{}{}, &Failure{Type: TypeHTTPInvalidRequest, Message: fmt.Sprintf("build request: %v", err), NonRetryable: true}
	}
	if f := checkURL(spec.URL, hreq.URL); f != nil {
		return struct{}{}, f
	}
	for k, v := range spec.Headers {
		if strings.EqualFold(k, "Host") {
			// net/http ignores a Host header field; the Host goes here.
			hreq.Host = v
			continue
		}
		hreq.Header.Set(k, v)
	}
	// The values of the two fields wf adds live in the outputs.
	out := &httpOutputs{}
	if req.IdempotencyKey != "" && !hasHeader(spec.Headers, "Idempotency-Key") {
		out.own[0] = req.IdempotencyKey
		hreq.Header["Idempotency-Key"] = out.own[0:1:1]
	}
	if !hasHeader(spec.Headers, "User-Agent") {
		out.own[1] = "wf"
		hreq.Header["User-Agent"] = out.own[1:2:2]
	}

	client := r.clients[b2i(spec.InsecureSkipVerify)][b2i(wantsRedirect(spec.ExpectStatus))]
	resp, err := client.Do(hreq)
	if err != nil {
		return struct{}{}, httpErrorFailure(ctx, actx, req.Timeout, "", err)
	}
	// The body is read to its end whenever it fits max_response_bytes
	// (ReadAll below, or the one-byte probe when it is exactly that long):
	// that returns the connection to the pool. Closing the unread rest of
	// a truncated body drops the connection instead of draining it, which
	// is what a possibly endless or slow body needs.
	defer resp.Body.Close()

	out.Status, out.Headers = resp.StatusCode, make(map[string]string, len(resp.Header))
	for k, vs := range resp.Header {
		out.Headers[k] = strings.Join(vs, ", ")
	}

	limit := r.maxOutput
	if spec.MaxResponseBytes > 0 {
		limit = spec.MaxResponseBytes
	}
	data, err := readAll(io.LimitReader(resp.Body, limit), resp.ContentLength, limit)
	out.Body = string(data)
	if err != nil {
		return out, httpErrorFailure(ctx, actx, req.Timeout, "read body: ", err)
	}
	truncated := false
	if int64(len(data)) == limit {
		var one [1]byte
		n, _ := io.ReadFull(resp.Body, one[:])
		truncated = n > 0
	}
	out.BodyTruncated = truncated
	out.Result = parseJSONResult(data, truncated)
	note := ""
	if truncated {
		note = fmt.Sprintf("body truncated to the first %d bytes (max_response_bytes)", len(data))
	}

	if expectedStatus(spec.ExpectStatus, resp.StatusCode) {
		return out, nil
	}
	msg := resp.Proto + " " + resp.Status
	if b := strings.TrimSpace(firstBytes(data, messageBodyBytes)); b != "" {
		msg += ": " + b
	}
	f := &Failure{Type: "http:" + strconv.Itoa(resp.StatusCode), Message: joinNotes(msg, note)}
	// Any failed response may say when to come back (413, 429, 503 and
	// 301 alike); the retry policy caps what it honours.
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), r.now()); ok {
		f.RetryAfter, f.HasRetryAfter = d, true
	}
	return out, f
}

// invalidURL is the failure of a URL that does not parse or is not an
// absolute http or https URL; nil for a valid one.
func invalidURL(raw string) *Failure {
	u, err := url.Parse(raw)
	if err != nil {
		return &Failure{Type: TypeHTTPInvalidRequest, Message: fmt.Sprintf("parse url: %v", err), NonRetryable: true}
	}
	return checkURL(raw, u)
}

// checkURL is the failure of a parsed URL that is not an absolute http or
// https URL; nil when it is one.
func checkURL(raw string, u *url.URL) *Failure {
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &Failure{Type: TypeHTTPInvalidRequest, Message: fmt.Sprintf("url %q: want an absolute http:// or https:// URL", raw), NonRetryable: true}
	}
	return nil
}

// presizeMax bounds the buffer readAll makes before any of the body came.
const presizeMax = 64 << 10

// readAll is io.ReadAll(r), starting with room for a body of the length
// the response announced (when below limit) instead of 512 bytes: a small
// body is then read without growing, or wasting, the buffer. At most
// presizeMax is taken on the server's word; a longer body grows as it
// arrives, as with io.ReadAll.
func readAll(r io.Reader, announced, limit int64) ([]byte, error) {
	size := int64(512)
	if announced >= 0 && announced < limit {
		// One byte more, so the read that finds the end does not grow it.
		size = min(announced+1, presizeMax)
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			// Let append pick how much more room to make.
			b = append(b, 0)[:len(b)]
		}
	}
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
	var redirects *tooManyRedirects
	if errors.As(err, &redirects) {
		return &Failure{Type: TypeHTTPTooManyRedirects, Message: prefix + redirects.Error()}
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

// maxDuration is the longest time.Duration.
const maxDuration = time.Duration(1<<63 - 1)

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): delay
// seconds or an HTTP-date, the latter relative to now; a date in the past
// means no wait. A delay too long for time.Duration saturates: the server
// asked for a very long wait, and the retry policy's maximum_retry_after
// decides how much of it to honour. ok is false when the header is absent
// or not one of those forms (negative, fractional, garbage).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > maxRetryAfterSeconds {
			// Only a range error is possible for a string of digits.
			return maxDuration, true
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
