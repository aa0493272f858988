// Package event defines the typed events a run emits and the bus that
// delivers them to every view (plain lines, -json, the TUI, wf watch).
// Publishing never blocks: a slow view cannot slow the executor.
package event

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Type is an event type; the names are part of the -json contract.
type Type string

const (
	Plan              Type = "plan"
	AttemptStarted    Type = "attempt_started"
	AttemptSucceeded  Type = "attempt_succeeded"
	AttemptFailed     Type = "attempt_failed"
	RetryScheduled    Type = "retry_scheduled"
	TimerRecovered    Type = "timer_recovered"
	BudgetWait        Type = "budget_wait"
	ActivitySucceeded Type = "activity_succeeded"
	ActivityFailed    Type = "activity_failed"
	// ActivitySkipped is an extension to the SPEC's list: an activity that
	// did not run because an upstream activity failed (reason
	// "upstream_failed").
	ActivitySkipped Type = "activity_skipped"
	RunCompleted    Type = "run_completed"
	// OrphanEnded is an extension: at start-up wf found processes of an
	// attempt that a previous wf left running (after a kill -9 or a
	// crash) and killed them before recording the attempt interrupted.
	// ProcessGroup and PIDs say what was killed.
	OrphanEnded Type = "orphan_ended"
	// OrphanAlive is an extension: processes of an attempt left running
	// by a previous wf survived SIGKILL (PIDs); the activity's next
	// attempt is not started in this run, so that two attempts never run
	// at once. Error says so in words.
	OrphanAlive Type = "orphan_alive"
)

const (
	// BudgetHigh says a retry budget's usage reached 80 % of max_retries.
	// The core emits it once per crossing: again only after usage fell
	// below 80 % and rose again. It is the one source of the warning in
	// the plain output.
	BudgetHigh Type = "budget_high"
	// Circuit breaker transitions (SPEC §11), with Breaker and Circuit
	// set; not tied to one activity (Activity is empty).
	CircuitOpened   Type = "circuit_opened"
	CircuitHalfOpen Type = "circuit_half_open"
	CircuitClosed   Type = "circuit_closed"
	// CircuitWait is an extension: an attempt waits (durably) for its
	// circuit breaker, open until Circuit.HalfOpenAt, or half-open with
	// every trial slot taken. Attempt is the waiting attempt, FireAt when
	// it asks again (absent: when a trial call ends).
	CircuitWait Type = "circuit_wait"
	// Heartbeat is an extension: a running exec attempt wrote to
	// $WF_HEARTBEAT_FILE (SPEC §11). At most one a second per activity;
	// HeartbeatDetails holds the start of what it wrote.
	Heartbeat Type = "heartbeat"
)

// Failure reasons carried by activity_failed.
const (
	ReasonNonRetryable    = "non_retryable"
	ReasonMaxAttempts     = "max_attempts"
	ReasonExpired         = "expired"
	ReasonRetryIf         = "retry_if"
	ReasonBudgetExhausted = "budget_exhausted"
	ReasonUpstreamFailed  = "upstream_failed"
	// ReasonInterrupted: the engine stopped mid-attempt and the policy
	// opted out of resuming (non_retryable_errors = ["interrupted"]); a
	// person should look before it runs again.
	ReasonInterrupted = "interrupted"
	// ReasonCircuitOpen: the activity's circuit breaker is open and its
	// policy says on_open = "fail" (error type circuit_open).
	ReasonCircuitOpen = "circuit_open"
)

// Delay sources carried by retry_scheduled (DelaySource).
const (
	SourcePolicy = "policy"
	SourceServer = "server"
	SourceBudget = "budget"
	SourceManual = "manual"
	// SourceInterrupted: the attempt before was interrupted by the engine;
	// the next one starts at once and the interrupted one counts against
	// no limit.
	SourceInterrupted = "interrupted"
	// SourceCircuit: the attempt waited for its circuit breaker.
	SourceCircuit = "circuit"
)

// Run statuses carried by run_completed.
const (
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
)

// Error is the error of a failed attempt.
type Error struct {
	Type         string `json:"type"`
	Message      string `json:"message"`
	NonRetryable bool   `json:"non_retryable"`
}

// BudgetUsage is a retry budget's usage at the time of the event.
type BudgetUsage struct {
	Name       string `json:"name"`
	Used       int    `json:"used"`
	MaxRetries int    `json:"max_retries"`
	WindowMs   int64  `json:"window_ms"`
	// Stamps are the grant times in the window when the event was made,
	// oldest first, so that an in-process view (metrics) can let usage
	// decay as grants leave the window without waiting for the next event.
	// Shared with the core and never modified: read only. Not in -json.
	Stamps []time.Time `json:"-"`
	// Parent is the usage of the budget this one draws from too (nested
	// budgets, SPEC §11); nil at the root.
	Parent *BudgetUsage `json:"parent,omitempty"`
}

// Exhausted returns the first level of the chain whose window is full
// (Used >= MaxRetries), the one that refuses retries; nil when none is.
func (b *BudgetUsage) Exhausted() *BudgetUsage {
	for l := b; l != nil; l = l.Parent {
		if l.Used >= l.MaxRetries {
			return l
		}
	}
	return nil
}

// Circuit states of CircuitInfo.State.
const (
	CircuitStateClosed   = "closed"
	CircuitStateOpen     = "open"
	CircuitStateHalfOpen = "half_open"
)

// CircuitInfo is a circuit breaker's state at the time of the event.
type CircuitInfo struct {
	Name string `json:"name"`
	// State is "closed", "open" or "half_open".
	State string `json:"state"`
	// HalfOpenAt is when an open breaker lets trial calls through.
	HalfOpenAt *time.Time `json:"half_open_at,omitempty"`
	// Calls and Failures are the outcomes in the window (closed), or
	// those that opened it (circuit_opened).
	Calls    int `json:"calls"`
	Failures int `json:"failures"`
	// The breaker's settings, so that a view can say what they mean.
	FailureRatio  float64 `json:"failure_ratio"`
	MinimumCalls  int     `json:"minimum_calls"`
	WindowMs      int64   `json:"window_ms"`
	BreakMs       int64   `json:"break_ms"`
	HalfOpenCalls int     `json:"half_open_calls"`
}

// ActivityInfo describes one activity in a plan event, so that a view can
// lay out its rows before anything runs.
type ActivityInfo struct {
	Activity string `json:"activity"` // "activity.NAME"
	Kind     string `json:"kind"`
	// Action is the plan action: run, rerun, resume, retry_failed, unchanged.
	Action string `json:"action"`
	// MaxAttempts is the attempt limit of the activity's last retry rule
	// (0 = unlimited; 1 when it has no retry block).
	MaxAttempts int      `json:"max_attempts"`
	DependsOn   []string `json:"depends_on,omitempty"`
	// Attempts already made in the current generation (resume).
	Attempts int `json:"attempts,omitempty"`
}

// Summary closes a run.
type Summary struct {
	Activities int   `json:"activities"`
	Succeeded  int   `json:"succeeded"`
	Failed     int   `json:"failed"`
	Skipped    int   `json:"skipped"`
	Unchanged  int   `json:"unchanged"`
	Pending    int   `json:"pending"`
	Attempts   int   `json:"attempts"`
	Retries    int   `json:"retries"`
	DurationMs int64 `json:"duration_ms"`
}

// Event is one thing that happened in a run. Optional fields are pointers
// or omitted when empty so that -json prints only what applies.
type Event struct {
	Time time.Time `json:"@timestamp"`
	Type Type      `json:"type"`
	// Workflow is the workflow name; Instance the instance address
	// "workflow/key".
	Workflow string `json:"workflow"`
	Instance string `json:"instance"`
	Activity string `json:"activity,omitempty"` // "activity.NAME"
	Kind     string `json:"kind,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	// MaxAttempts is the limit that applies to Attempt (0 = unlimited),
	// raised by the interrupted attempts of the generation, which are
	// numbered but never counted: attempt k of N never shows k > N.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Interrupted is the number of attempts of this generation the engine
	// cut short (they do not count against any limit).
	Interrupted int    `json:"interrupted,omitempty"`
	Error       *Error `json:"error,omitempty"`
	DelayMs     *int64 `json:"delay_ms,omitempty"`
	// DelaySource: "policy", "server", "budget", "manual" or
	// "interrupted" (see the Source constants).
	DelaySource string       `json:"delay_source,omitempty"`
	FireAt      *time.Time   `json:"fire_at,omitempty"`
	DurationMs  *int64       `json:"duration_ms,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	Status      string       `json:"status,omitempty"`
	Budget      *BudgetUsage `json:"budget,omitempty"`
	// Activities is set on plan events.
	Activities []ActivityInfo `json:"activities,omitempty"`
	// Summary is set on run_completed.
	Summary *Summary `json:"summary,omitempty"`
	// IdempotencyKey is set on attempt_started.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// ProcessGroup and PIDs are set on orphan_ended and orphan_alive:
	// the recorded process group of the attempt (0 when it was gone) and
	// the processes killed, or the ones that survived.
	ProcessGroup int   `json:"process_group,omitempty"`
	PIDs         []int `json:"pids,omitempty"`
	// PreviousError is set on the attempt_started of a retry: the error
	// of the attempt it retries (what wf_retries_total counts it under).
	PreviousError *Error `json:"previous_error,omitempty"`
	// ScheduledAt is set on the attempt_started of a retry that a timer
	// started: when that timer was due, so views can measure its lateness.
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	// Breaker names the circuit breaker of circuit_* events; Circuit is
	// its state then.
	Breaker string       `json:"breaker,omitempty"`
	Circuit *CircuitInfo `json:"circuit,omitempty"`
	// Circuits is set on plan events: every breaker the run's activities
	// are behind, as loaded.
	Circuits []CircuitInfo `json:"circuits,omitempty"`
	// HeartbeatDetails is set on heartbeat events: the start (at most
	// HeartbeatDetailsTail bytes) of what the attempt last wrote.
	HeartbeatDetails string `json:"heartbeat_details,omitempty"`
	// Rule says which retry rule MaxAttempts belongs to and what the rules
	// have counted, on the events of activities with retry rules.
	Rule *RuleRef `json:"rule,omitempty"`
	// Output is the end of what the attempt printed, on attempt_succeeded
	// and attempt_failed of exec and http attempts.
	Output *Output `json:"output,omitempty"`
	// DelayCapped is set on retry_scheduled when the activity asked for a
	// longer delay (RequestedDelayMs) than the policy's maximum_retry_after
	// allows, so DelayMs is that cap instead.
	DelayCapped      bool   `json:"delay_capped,omitempty"`
	RequestedDelayMs *int64 `json:"requested_delay_ms,omitempty"`
}

// RuleRef names the retry rule that speaks for an activity: the one whose
// maximum_attempts is the event's MaxAttempts. Views use it to show
// "attempt 6 · http:429 rule 2/10" instead of a limit that changes without
// saying why, and to never show more attempts than the limit: attempts are
// numbered across rules, but each rule counts only the failures it matched,
// and an interrupted attempt may be counted by none.
type RuleRef struct {
	// Index is the rule's position among the activity's retry blocks,
	// 1-based; 0 while none has decided a failure yet (several rules).
	Index int `json:"index"`
	// Rules is how many retry rules the activity has.
	Rules int `json:"rules"`
	// On is the rule's on patterns; empty when it matches every error.
	On []string `json:"on,omitempty"`
	// Counted is the failures this rule has counted so far; MaxAttempts
	// bounds it.
	Counted int `json:"counted"`
	// CountedAll is the failures all the activity's rules have counted.
	// Ended attempts beyond it were counted by no rule (interrupted).
	CountedAll int `json:"counted_all"`
}

// HeartbeatDetailsTail bounds HeartbeatDetails in events.
const HeartbeatDetailsTail = 256

// OutputTail bounds each stream in Output, so that events stay small on
// the bus, on the event socket and in the dashboard's memory.
const OutputTail = 4 << 10

// Output is the tail (at most OutputTail bytes each, cut at a line or rune
// boundary) of what an attempt printed: stdout and stderr for exec, the
// response body for http. The *Bytes fields are the sizes before the cut.
type Output struct {
	Stdout      string `json:"stdout,omitempty"`
	StdoutBytes int    `json:"stdout_bytes,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
	StderrBytes int    `json:"stderr_bytes,omitempty"`
	Body        string `json:"body,omitempty"`
	BodyBytes   int    `json:"body_bytes,omitempty"`
}

// Ms is a helper for the *int64 millisecond fields.
func Ms(d time.Duration) *int64 {
	v := d.Milliseconds()
	return &v
}

// NewOutput builds an Output from what an attempt captured; nil when it
// printed nothing.
func NewOutput(stdout, stderr, body string) *Output {
	if stdout == "" && stderr == "" && body == "" {
		return nil
	}
	return &Output{
		Stdout: tail(stdout), StdoutBytes: len(stdout),
		Stderr: tail(stderr), StderrBytes: len(stderr),
		Body: tail(body), BodyBytes: len(body),
	}
}

// tail keeps the last OutputTail bytes of s, starting at a line when one
// begins in the first quarter of the kept part, else at a rune.
func tail(s string) string {
	if len(s) <= OutputTail {
		return s
	}
	t := s[len(s)-OutputTail:]
	if i := strings.IndexByte(t[:OutputTail/4], '\n'); i >= 0 {
		return t[i+1:]
	}
	for i := 0; i < len(t) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(t[i]) {
			return t[i:]
		}
	}
	return t
}
