// Package activity runs the activity kinds that do I/O: exec (a process in
// its own process group, with output and error files) and http (one request).
// sleep is not here: it is a durable timer owned by the executor core.
//
// A Runner runs one attempt at a time per call and reports everything as
// data: Run never returns an error and never panics. A failed attempt is a
// Result with a typed Failure; the error types are the ones of SPEC §3 plus a
// few for broken configurations (see the Type* constants).
//
// Outputs are always a JSON object, on failure too, so the attempt log can
// show what the activity printed before it failed:
//
//	exec: {"stdout": "...", "stderr": "...", "exit_code": 0, "result": <json|null>}
//	http: {"status": 200, "headers": {"Content-Type": "..."}, "body": "...", "result": <json|null>, "body_truncated": false}
//
// exit_code is -1 when the process did not exit on its own (killed by a
// signal, timed out, interrupted, or never started).
package activity

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"github.com/wf-engine/wf/config"
)

// Error types produced by this package. Patterns in retry policies match
// against these strings; exit:N, signal:NAME and http:N are built from the
// status or signal and have no constant.
const (
	// TypeTimeout: the attempt exceeded Request.Timeout.
	TypeTimeout = "timeout"
	// TypeInterrupted: the caller's context was cancelled mid-attempt.
	TypeInterrupted = "interrupted"
	// TypeExecNotFound: the command does not exist or is not executable.
	TypeExecNotFound = "exec:not_found"
	// TypeExecStart: the process could not be started for another reason
	// (for example, the working directory does not exist).
	TypeExecStart = "exec:start"
	// TypeOutputInvalidJSON: the process succeeded but $WF_OUTPUT_FILE does
	// not hold valid JSON. Non-retryable: rerunning the same program is
	// unlikely to fix its output format.
	TypeOutputInvalidJSON = "output:invalid_json"
	// TypeOutputTooLarge: $WF_OUTPUT_FILE is larger than Options.MaxOutput.
	// Non-retryable for the same reason.
	TypeOutputTooLarge = "output:too_large"
	// TypeHTTPConnection: connection refused or reset, DNS or TLS failure.
	TypeHTTPConnection = "http:connection"
	// TypeHTTPTooManyRedirects: the server kept redirecting after the 10
	// redirects an http activity follows.
	TypeHTTPTooManyRedirects = "http:too_many_redirects"
	// TypeHTTPInvalidRequest: the request cannot be built (bad URL, scheme
	// or method). Non-retryable.
	TypeHTTPInvalidRequest = "http:invalid_request"
	// TypeInvalidSpec: the request carries no exec or http block, or one
	// that cannot be run (empty command). Non-retryable.
	TypeInvalidSpec = "activity:invalid_spec"
	// TypeInternal: a bug in wf (a recovered panic). Retryable, so that a
	// transient fault does not fail the workflow outright.
	TypeInternal = "internal"
)

// DefaultMaxOutput caps each captured stream, the HTTP body and the output
// and error files when Options.MaxOutput is zero.
const DefaultMaxOutput int64 = 1 << 20

// DefaultWaitDelay is how long Run waits for a process's stdout and stderr to
// close after the process itself has exited or been killed, when
// Options.WaitDelay is zero.
const DefaultWaitDelay = time.Second

// Request is one attempt of one activity.
type Request struct {
	// Workflow is the workflow name, Instance the instance key and Activity
	// the bare activity name.
	Workflow, Instance, Activity string
	// Attempt is 1-based.
	Attempt int
	// IdempotencyKey is stable across all attempts of one activity
	// execution; exec sees it as WF_IDEMPOTENCY_KEY, http sends it as the
	// Idempotency-Key header.
	IdempotencyKey string
	// Spec is the resolved kind block; Exec or HTTP must be set.
	Spec *config.Resolved
	// Timeout bounds the attempt (start-to-close); 0 means none.
	Timeout time.Duration
	// HeartbeatTimeout, for exec, makes the attempt heartbeat: it gets
	// $WF_HEARTBEAT_FILE and is killed (TypeHeartbeatTimeout) when it
	// goes that long without writing to it. 0 means no heartbeats.
	HeartbeatTimeout time.Duration
	// HeartbeatDetails is what an earlier attempt last wrote there; an
	// exec attempt gets it as $WF_HEARTBEAT_DETAILS when it is not empty.
	HeartbeatDetails string
}

// Failure is a typed attempt failure. It has the same fields as
// retry.Failure and converts to it directly: retry.Failure(*f).
type Failure struct {
	Type, Message string
	// NonRetryable is set when the activity itself flagged the error (error
	// file) or when retrying cannot help (invalid output, invalid spec).
	NonRetryable bool
	// RetryAfter is the delay the activity or server asked for; valid only
	// when HasRetryAfter is set.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Result is the outcome of one attempt.
type Result struct {
	Start, End time.Time
	// Outputs is a JSON object, on failure too (whatever is known).
	Outputs json.RawMessage
	// Failure is nil on success.
	Failure *Failure
	// HeartbeatDetails is the last non-empty content the attempt wrote to
	// $WF_HEARTBEAT_FILE ("" when none).
	HeartbeatDetails string
	// Printed, when Known, is what decoding Outputs' stdout, stderr and
	// body gives, so that the executor need not decode Outputs to show
	// what the attempt printed. Set for http attempts whose body is valid
	// UTF-8 and exec attempts whose stdout and stderr are (encoding
	// replaces invalid bytes, which decoding would then show).
	Printed Printed
}

// Printed is what an attempt printed, as its Outputs hold it.
type Printed struct {
	Known                bool
	Stdout, Stderr, Body string
}

// Options configures a Runner. The zero value is usable.
type Options struct {
	// Now is the clock for Start/End and for HTTP-date Retry-After headers;
	// time.Now when nil.
	Now func() time.Time
	// HTTPClient is the base client for http activities; a client with a
	// clone of http.DefaultTransport when nil. Its transport is cloned (when
	// it is an *http.Transport) for insecure_skip_verify requests.
	HTTPClient *http.Client
	// Parallelism is the most attempts the caller runs at once (wf
	// apply's -parallelism). Without an HTTPClient it sizes the pool of
	// idle connections kept per host, so that every request of a run at
	// full parallelism against one host reuses a connection; 10 when
	// zero.
	Parallelism int
	// MaxOutput caps each of stdout, stderr, the output and error files,
	// and the HTTP body of a request whose spec sets no max_response_bytes,
	// in bytes; DefaultMaxOutput when zero or negative. Only the first
	// MaxOutput bytes are kept; the rest is discarded as it arrives.
	MaxOutput int64
	// TempDir is where the Runner creates its directory for the
	// per-attempt $WF_OUTPUT_FILE and $WF_ERROR_FILE paths (on the first
	// exec attempt; Close removes it); os.TempDir() when empty.
	TempDir string
	// BaseEnv is the environment every exec activity starts from; the
	// process environment (os.Environ, read once by NewRunner) when nil.
	// Pass an empty non-nil slice for an empty base environment.
	BaseEnv []string
	// WaitDelay bounds how long Run waits for stdout/stderr to close after
	// the process has exited or been killed (a background child can hold
	// them open); DefaultWaitDelay when zero.
	WaitDelay time.Duration
}

// Runner runs exec and http attempts. It is safe for concurrent use. Call
// Close once it is no longer needed, to remove its attempt directory.
type Runner struct {
	now       func() time.Time
	maxOutput int64
	tempDir   string
	baseEnv   []string
	// baseNames are baseEnv's names when it needs no dedupEnv of its
	// own (baseEnvNames), nil otherwise.
	baseNames map[string]struct{}
	waitDelay time.Duration
	// clients are indexed by [insecure_skip_verify][don't follow
	// redirects]; built once so connections are reused across attempts.
	clients [2][2]*http.Client

	// shared holds what every exec attempt reuses instead of creating it
	// per attempt: see exec.go.
	shared execShared
}

// NewRunner returns a Runner with opts' defaults filled in.
func NewRunner(opts Options) *Runner {
	r := &Runner{
		now:       opts.Now,
		maxOutput: opts.MaxOutput,
		tempDir:   opts.TempDir,
		baseEnv:   opts.BaseEnv,
		waitDelay: opts.WaitDelay,
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.maxOutput <= 0 {
		r.maxOutput = DefaultMaxOutput
	}
	if r.baseEnv == nil {
		r.baseEnv = os.Environ()
	}
	r.baseNames = baseEnvNames(r.baseEnv)
	if r.waitDelay <= 0 {
		r.waitDelay = DefaultWaitDelay
	}
	r.clients = newHTTPClients(opts.HTTPClient, opts.Parallelism)
	return r
}

// Close removes the Runner's attempt directory (with any output or error
// file a stray background process wrote after its attempt ended), releases
// what exec attempts share and closes idle HTTP connections. It waits for
// exec attempts still in flight. The Runner stays usable: a later exec
// attempt sets things up again.
func (r *Runner) Close() error {
	closeIdle(r.clients)
	if err := r.shared.close(); err != nil {
		return fmt.Errorf("close activity runner: %w", err)
	}
	return nil
}

// Run performs one attempt. It never panics: a panic inside is reported as
// a TypeInternal failure. When ctx is cancelled before or during the
// attempt, the result is a TypeInterrupted failure (and an exec process
// group is killed).
func (r *Runner) Run(ctx context.Context, req Request) (res Result) {
	start := r.now()
	defer func() {
		if p := recover(); p != nil {
			res = Result{
				Start:   start,
				End:     r.now(),
				Outputs: json.RawMessage("{}"),
				Failure: &Failure{
					Type:    TypeInternal,
					Message: fmt.Sprintf("panic in activity runner: %v\n%s", p, debug.Stack()),
				},
			}
		}
	}()

	var outputs any
	var f *Failure
	var details string
	switch {
	case ctx.Err() != nil:
		outputs = struct{}{}
		f = &Failure{Type: TypeInterrupted, Message: "cancelled before the attempt started"}
	case req.Spec == nil:
		outputs = struct{}{}
		f = &Failure{Type: TypeInvalidSpec, Message: "no activity spec", NonRetryable: true}
	case req.Spec.Exec != nil:
		outputs, f, details = r.runExec(ctx, req)
	case req.Spec.HTTP != nil:
		outputs, f = r.runHTTP(ctx, req)
	case req.Spec.Sleep != nil:
		outputs = struct{}{}
		f = &Failure{Type: TypeInvalidSpec, Message: "sleep is a durable timer handled by the executor, not an activity runner", NonRetryable: true}
	default:
		outputs = struct{}{}
		f = &Failure{Type: TypeInvalidSpec, Message: "activity spec has no exec or http block", NonRetryable: true}
	}

	var printed Printed
	raw, err := encodeOutputs(outputs)
	switch {
	case err != nil:
		// Outputs hold only strings, numbers, maps and validated JSON, so
		// this is a bug; keep the failure (if any) but say what went wrong.
		raw = json.RawMessage("{}")
		if f == nil {
			f = &Failure{Type: TypeInternal, Message: fmt.Sprintf("encode outputs: %v", err)}
		}
	default:
		switch o := outputs.(type) {
		case *httpOutputs:
			if utf8.ValidString(o.Body) {
				// Its only field that decodes as stdout, stderr or body.
				printed = Printed{Known: true, Body: o.Body}
			}
		case *execOutputs:
			// Valid UTF-8 decodes as it is (encoding replaces invalid
			// bytes, which decoding would then show).
			if utf8.ValidString(o.Stdout) && utf8.ValidString(o.Stderr) {
				printed = Printed{Known: true, Stdout: o.Stdout, Stderr: o.Stderr}
			}
		}
	}
	return Result{Start: start, End: r.now(), Outputs: raw, Failure: f, HeartbeatDetails: details, Printed: printed}
}

// jsonAppender is an attempt's outputs that encode themselves by hand,
// as json.Marshal would (*httpOutputs, *execOutputs).
type jsonAppender interface {
	appendJSON([]byte) ([]byte, error)
}

// encodeOutputs is json.Marshal(outputs), by hand for outputs that can
// (json.Marshal's own error when that fails).
func encodeOutputs(outputs any) ([]byte, error) {
	if o, ok := outputs.(jsonAppender); ok {
		if b, err := o.appendJSON(nil); err == nil {
			return b, nil
		}
	}
	return json.Marshal(outputs)
}

// attemptContext derives the per-attempt context: with a deadline when the
// request has a timeout.
func attemptContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return context.WithCancel(ctx)
}

// parseJSONResult returns b as a JSON value when it is valid JSON (ignoring
// surrounding whitespace) and nil otherwise. A truncated stream is never
// parsed: its head can be valid JSON ("12" of "1234") without being the
// value the activity produced.
func parseJSONResult(b []byte, truncated bool) json.RawMessage {
	if truncated {
		return nil
	}
	t := trimSpace(b)
	if len(t) == 0 || !json.Valid(t) {
		return nil
	}
	return json.RawMessage(t)
}

func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
