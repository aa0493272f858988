package temporal

import (
	"testing"

	sdktemporal "go.temporal.io/sdk/temporal"
)

// TestLostWorkerKeepsHeartbeatDetails: a worker lost mid-attempt is an
// interrupted attempt, and the heartbeat details it last sent reach the
// next attempt.
func TestLostWorkerKeepsHeartbeatDetails(t *testing.T) {
	res := attemptFailure(sdktemporal.NewHeartbeatTimeoutError("row 4200"))
	if !res.Interrupted || res.HeartbeatDetails != "row 4200" {
		t.Fatalf("result = %+v", res)
	}
	if res := attemptFailure(sdktemporal.NewHeartbeatTimeoutError()); !res.Interrupted || res.HeartbeatDetails != "" {
		t.Fatalf("without details: %+v", res)
	}
}
