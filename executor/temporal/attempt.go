package temporal

import (
	"encoding/json"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
)

// AttemptInput is the input of one AttemptActivity: one exec or http
// attempt, as the core asked for it.
type AttemptInput struct {
	Workflow string `json:"workflow"`
	// Instance is the instance key.
	Instance       string           `json:"instance"`
	Activity       string           `json:"activity"`
	Generation     int              `json:"generation"`
	Number         int              `json:"number"`
	IdempotencyKey string           `json:"idempotency_key"`
	Spec           *config.Resolved `json:"spec"`
	// Timeout is the activity's own timeout (error type "timeout").
	Timeout time.Duration `json:"timeout,omitempty"`
	// HeartbeatTimeout and HeartbeatDetails: the activity's
	// heartbeat_timeout and what an earlier attempt last wrote to its
	// heartbeat file (SPEC §11).
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	HeartbeatDetails string        `json:"heartbeat_details,omitempty"`
}

// AttemptResult is what a worker reports of one attempt. A failed attempt
// is returned as a non-retryable Temporal application error (so that
// Temporal's history and UI show it failed) whose details hold this.
type AttemptResult struct {
	Start   time.Time         `json:"start"`
	End     time.Time         `json:"end"`
	Outputs json.RawMessage   `json:"outputs,omitempty"`
	Failure *activity.Failure `json:"failure,omitempty"`
	// Worker is the identity of the worker that ran the attempt.
	Worker string `json:"worker,omitempty"`
	// Interrupted is set when the engine cut the attempt short (its worker
	// was lost or shut down, the attempt was cancelled): never counted
	// against any limit (SPEC §4.1).
	Interrupted bool `json:"interrupted,omitempty"`
	// HeartbeatDetails is what the attempt last wrote to its heartbeat
	// file.
	HeartbeatDetails string `json:"heartbeat_details,omitempty"`
}
