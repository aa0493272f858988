// Package event defines the typed events a run emits and the bus that
// delivers them to every view (plain lines, -json, the TUI, wf watch).
// Publishing never blocks: a slow view cannot slow the executor.
package event

import "time"

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
)

// Failure reasons carried by activity_failed.
const (
	ReasonNonRetryable    = "non_retryable"
	ReasonMaxAttempts     = "max_attempts"
	ReasonExpired         = "expired"
	ReasonRetryIf         = "retry_if"
	ReasonBudgetExhausted = "budget_exhausted"
	ReasonUpstreamFailed  = "upstream_failed"
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
	// MaxAttempts is the limit that applies to Attempt (0 = unlimited).
	MaxAttempts int    `json:"max_attempts,omitempty"`
	Error       *Error `json:"error,omitempty"`
	DelayMs     *int64 `json:"delay_ms,omitempty"`
	// DelaySource: "policy", "server", "budget" or "manual".
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

	// DelayCapped is set on retry_scheduled when the activity asked for a
	// longer delay (RequestedDelayMs) than the policy's maximum_retry_after
	// allows, so DelayMs is that cap instead.
	DelayCapped      bool   `json:"delay_capped,omitempty"`
	RequestedDelayMs *int64 `json:"requested_delay_ms,omitempty"`
}

// Ms is a helper for the *int64 millisecond fields.
func Ms(d time.Duration) *int64 {
	v := d.Milliseconds()
	return &v
}
