// Package record defines what wf keeps in its state store, as plain data,
// and how it is encoded. It has no I/O and no Badger dependency, so the
// executor's deterministic core can produce and consume records directly.
package record

import (
	"encoding/json"
	"time"
)

// SchemaVersion is the version of the on-disk layout. 1: Badger only; 2:
// a checksummed write-ahead log and checkpoint in front of Badger; 3:
// activities in a binary form (binary.go; JSON ones still read). A writer
// migrates a schema-1 state on its first open and marks a schema-2 one 3
// (its records stay as they are until rewritten); a newer version is
// refused with a clear error, so an older wf never reads a binary
// activity as damage.
const SchemaVersion = 3

// Status is an activity's status within its current generation.
type Status string

const (
	StatusPending   Status = "pending"   // generation created, no attempt yet
	StatusRunning   Status = "running"   // an attempt has started and not ended
	StatusWaiting   Status = "waiting"   // a timer is pending (retry backoff, budget wait or sleep)
	StatusSucceeded Status = "succeeded" // terminal
	StatusFailed    Status = "failed"    // terminal: failed permanently
	StatusSkipped   Status = "skipped"   // terminal: an upstream activity failed
)

// Instance is one workflow instance: a workflow plus its key.
type Instance struct {
	Workflow string    `json:"workflow"`
	Key      string    `json:"key"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

// Address is "workflow/key".
func (i *Instance) Address() string { return i.Workflow + "/" + i.Key }

// TimerKind says why a timer exists.
type TimerKind string

const (
	TimerRetry  TimerKind = "retry"  // backoff before the next attempt
	TimerBudget TimerKind = "budget" // waiting for the retry budget to free
	TimerSleep  TimerKind = "sleep"  // a sleep activity's duration
	// TimerCircuit: the attempt waits for its circuit breaker to let it
	// through (the end of the break; due at once when it waits for a
	// trial call to end).
	TimerCircuit TimerKind = "circuit"
)

// Timer is a durable timer: data, not a goroutine.
type Timer struct {
	Kind   TimerKind `json:"kind"`
	FireAt time.Time `json:"fire_at"`
	// Attempt is the attempt number the timer will start (retry, budget)
	// or the attempt that is sleeping (sleep).
	Attempt int `json:"attempt"`
	// Set is when the timer was recorded.
	Set time.Time `json:"set"`
	// Delay is the wait that was chosen (for display and history).
	Delay time.Duration `json:"delay"`
	// Source says where the delay came from: "policy", "server" (a
	// Retry-After or retry_after), "budget" or "manual".
	Source string `json:"source,omitempty"`
}

// Error is a typed attempt error.
type Error struct {
	Type         string `json:"type"`
	Message      string `json:"message,omitempty"`
	NonRetryable bool   `json:"non_retryable,omitempty"`
}

// Activity is the state of one activity in one instance.
type Activity struct {
	Workflow string `json:"workflow"`
	Instance string `json:"instance"` // the instance key
	Name     string `json:"name"`
	// Generation starts at 1 and increases whenever the activity runs again
	// from attempt 1 (definition changed, -replace, retry after failure).
	Generation     int    `json:"generation"`
	DefHash        string `json:"def_hash"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         Status `json:"status"`
	// Attempts is the number of attempts started in this generation.
	Attempts int `json:"attempts"`
	// RuleCounts counts, per retry rule, the failures it has matched.
	RuleCounts []int `json:"rule_counts,omitempty"`
	// Interrupted counts the attempts of this generation that the engine
	// cut short (a crash, a signal, a failed commit). They are numbered
	// like every attempt but count against no limit.
	Interrupted int `json:"interrupted,omitempty"`
	// FirstStart is when attempt 1 of this generation started.
	FirstStart time.Time `json:"first_start,omitzero"`
	// LastDelay is the previous wait (decorrelated jitter needs it).
	LastDelay time.Duration `json:"last_delay,omitempty"`
	Timer     *Timer        `json:"timer,omitempty"`
	// Outputs is a JSON object of the activity's outputs (result, stdout,
	// stderr, exit_code, status, body, headers).
	Outputs   json.RawMessage `json:"outputs,omitempty"`
	LastError *Error          `json:"last_error,omitempty"`
	// FailReason says why a failed activity failed (max_attempts, ...),
	// or why a skipped one was skipped (upstream_failed, condition_false,
	// ...).
	FailReason string    `json:"fail_reason,omitempty"`
	Finished   time.Time `json:"finished,omitzero"`
	// HeartbeatDetails is the last non-empty content an attempt of this
	// generation wrote to $WF_HEARTBEAT_FILE: its progress, which the
	// next attempt gets as $WF_HEARTBEAT_DETAILS.
	HeartbeatDetails string `json:"heartbeat_details,omitempty"`
}

// Outcome is how an attempt ended.
type Outcome string

const (
	OutcomeRunning     Outcome = "running"
	OutcomeSucceeded   Outcome = "succeeded"
	OutcomeFailed      Outcome = "failed"
	OutcomeInterrupted Outcome = "interrupted"
)

// Attempt is one entry of the attempt log.
type Attempt struct {
	Workflow       string    `json:"workflow"`
	Instance       string    `json:"instance"`
	Activity       string    `json:"activity"`
	Generation     int       `json:"generation"`
	Number         int       `json:"number"`
	IdempotencyKey string    `json:"idempotency_key"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end,omitzero"`
	Outcome        Outcome   `json:"outcome"`
	Error          *Error    `json:"error,omitempty"`
	// Wait is the wait chosen before the next attempt; HasWait is false
	// when no retry followed.
	Wait       time.Duration `json:"wait,omitempty"`
	HasWait    bool          `json:"has_wait,omitempty"`
	WaitSource string        `json:"wait_source,omitempty"`
	// FiredBy says what started this attempt: "" (first attempt or a
	// due timer) or "manual" (fired by hand from the TUI).
	FiredBy string `json:"fired_by,omitempty"`
	// Output is the tail of what the attempt printed (exec) or received
	// (http), as its attempt_succeeded or attempt_failed event carried it;
	// nil when it printed nothing, or for attempts recorded by an older wf.
	Output *Output `json:"output,omitempty"`
}

// Output is the captured end of an attempt's streams: at most a few KiB
// of each (the event package's OutputTail), with the sizes before the cut.
type Output struct {
	Stdout      string `json:"stdout,omitempty"`
	StdoutBytes int    `json:"stdout_bytes,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
	StderrBytes int    `json:"stderr_bytes,omitempty"`
	Body        string `json:"body,omitempty"`
	BodyBytes   int    `json:"body_bytes,omitempty"`
}

// Budget is the sliding window of a retry budget: the times at which
// retries were granted, oldest first.
type Budget struct {
	Name   string      `json:"name"`
	Stamps []time.Time `json:"stamps"`
}

// Breaker is the state of a circuit breaker (SPEC §11), shared by every
// activity behind it: closed with the outcomes in its window, open until
// HalfOpenAt, or half-open with the trial calls that succeeded.
type Breaker struct {
	Name string `json:"name"`
	// State is "closed", "open" or "half_open".
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// HalfOpenAt is when an open breaker lets trial calls through.
	HalfOpenAt time.Time `json:"half_open_at,omitzero"`
	// Window counts the outcomes in the window (closed) in buckets,
	// oldest first.
	Window         []BreakerBucket `json:"window,omitempty"`
	TrialSuccesses int             `json:"trial_successes,omitempty"`
	// Epoch counts the breaker's changes of state.
	Epoch int `json:"epoch,omitempty"`
}

// BreakerBucket counts the outcomes of one slice of a breaker's window,
// from Start to the next bucket's start.
type BreakerBucket struct {
	Start     time.Time `json:"start"`
	Successes int       `json:"successes,omitempty"`
	Failures  int       `json:"failures,omitempty"`
}

// Spawn identifies the process group an exec attempt runs in. The shell
// records it as soon as the process has started, so that a later run can
// end an attempt that a crashed engine left behind, and never touch a
// process that merely reused the PID: a PID is only the attempt's if the
// boot and the process start time match too.
type Spawn struct {
	Workflow   string `json:"workflow"`
	Instance   string `json:"instance"` // the instance key
	Activity   string `json:"activity"`
	Generation int    `json:"generation"`
	Number     int    `json:"number"`
	// PID is the process group leader; the group ID equals it.
	PID int `json:"pid"`
	// StartTicks is field 22 of /proc/PID/stat: when the process started,
	// in clock ticks since boot.
	StartTicks uint64 `json:"start_ticks"`
	// BootID is /proc/sys/kernel/random/boot_id at the time of the spawn.
	BootID string `json:"boot_id"`
	// Recorded is when the spawn was recorded.
	Recorded time.Time `json:"recorded"`
}

// Mutation is one change to the store. Exactly one of its records (or
// references) is set.
type Mutation struct {
	Instance       *Instance
	Activity       *Activity
	Attempt        *Attempt
	Budget         *Budget
	Spawn          *Spawn
	DeleteInstance *InstanceRef
	Breaker        *Breaker
	// DeleteActivity forgets one activity of an instance: its record,
	// pending timer, attempts and spawn (an activity removed from the
	// configuration).
	DeleteActivity *ActivityRef
	// RenameActivity moves one activity's record, pending timer, attempts
	// and spawn to another name (a moved block), rewriting the names
	// inside them.
	RenameActivity *ActivityRename

	// NoTimerBefore, with an Activity that has no Timer, says that the
	// record this writer last wrote of the activity, in an earlier
	// mutation, had none either: a store that indexes pending timers
	// then has no entry of it to delete. False says nothing (the store
	// deletes blind). Not a field that "exactly one" counts.
	NoTimerBefore bool
}

// ActivityRef names one activity of an instance.
type ActivityRef struct {
	Workflow string
	Key      string // the instance key
	Name     string
}

// ActivityRename names an activity and its new name.
type ActivityRename struct {
	Workflow string
	Key      string // the instance key
	From, To string
}

// InstanceRef names an instance.
type InstanceRef struct {
	Workflow string
	Key      string
}
