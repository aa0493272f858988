package executor_test

// Integration tests for the retry features of issue 4 (HTTP activities,
// activity-declared errors, retry budgets, retry_if, ordered retry rules).
// They run the real stack in-process, wired as `wf apply` wires it:
// config.Load -> planner.Build -> executor.Start with the real
// activity.Runner and a Badger statefile.Store in a temporary directory,
// against httptest servers and /bin/sh scripts, on the real clock. Intervals
// are kept small so that each test stays within a few seconds; the timing
// assertions are one-sided where a loaded machine can only make things
// later, with a tolerance on the other side.

import (
	"slices"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// ---- 1. Retry-After -----------------------------------------------------

func TestRetryFeaturesRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/honour": {{503, "1"}, {503, "1"}, {200, ""}},
		"/ignore": {{503, "1"}, {503, "1"}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

workflow "w" {
  key = "k"
  activity "honour" {
    http { url = "${var.base}/honour" }
    retry {
      backoff          = "fixed"
      initial_interval = "50ms"
      maximum_attempts = 5
    }
  }
  # The control: the same server answers, but the policy ignores it.
  activity "ignore" {
    http { url = "${var.base}/ignore" }
    retry {
      backoff           = "fixed"
      initial_interval  = "50ms"
      maximum_attempts  = 5
      honor_retry_after = false
    }
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("status %q; events:\n%s", out.Status, rec.dump())
	}

	tests := []struct {
		name             string
		minGap, maxGap   time.Duration
		source           string
		delay            time.Duration
		storedWaitSource string
	}{
		{"honour", time.Second, time.Second + timingSlack, "server", time.Second, "server"},
		{"ignore", 50 * time.Millisecond, 50*time.Millisecond + timingSlack, "policy", 50 * time.Millisecond, "policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := srv.hitsOf("/" + tt.name)
			if len(hs) != 3 {
				t.Fatalf("%d requests, want 3", len(hs))
			}
			for i, g := range gaps(hs) {
				if g < tt.minGap || g >= tt.maxGap {
					t.Errorf("gap before attempt %d = %s, want in [%s, %s)", i+2, g, tt.minGap, tt.maxGap)
				}
			}
			sched := rec.of(event.RetryScheduled, "activity."+tt.name)
			if len(sched) != 2 {
				t.Fatalf("%d retry_scheduled events, want 2", len(sched))
			}
			for _, ev := range sched {
				if ev.DelaySource != tt.source {
					t.Errorf("retry %d: delay_source %q, want %q", ev.Attempt, ev.DelaySource, tt.source)
				}
				if ev.DelayMs == nil || *ev.DelayMs != tt.delay.Milliseconds() {
					t.Errorf("retry %d: delay_ms %v, want %d", ev.Attempt, ev.DelayMs, tt.delay.Milliseconds())
				}
			}
			atts := attemptsOf(t, store, "w", "k", tt.name)
			if len(atts) != 3 {
				t.Fatalf("%d stored attempts, want 3", len(atts))
			}
			for _, a := range atts[:2] {
				if !a.HasWait || a.Wait != tt.delay || a.WaitSource != tt.storedWaitSource {
					t.Errorf("stored attempt %d: wait %s (has %v) source %q, want %s %q", a.Number, a.Wait, a.HasWait, a.WaitSource, tt.delay, tt.storedWaitSource)
				}
			}
		})
	}
}

// ---- 2. Idempotency-Key -------------------------------------------------

func TestRetryFeaturesIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/a":   {{503, ""}, {503, ""}, {200, ""}},
		"/b":   {{503, ""}, {200, ""}},
		"/own": {{503, ""}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

retry_policy "quick" {
  backoff          = "fixed"
  initial_interval = "10ms"
  maximum_attempts = 5
}

workflow "w" {
  key = "k"
  activity "a" {
    http { url = "${var.base}/a" }
    retry = retry_policy.quick
  }
  activity "b" {
    http { url = "${var.base}/b" }
    retry = retry_policy.quick
  }
  activity "own" {
    http {
      url     = "${var.base}/own"
      headers = { "idempotency-key" = "mine-42" }
    }
    retry = retry_policy.quick
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("status %q; events:\n%s", out.Status, rec.dump())
	}

	keysOf := func(path string, want int) []string {
		t.Helper()
		hs := srv.hitsOf(path)
		if len(hs) != want {
			t.Fatalf("%s: %d requests, want %d", path, len(hs), want)
		}
		var keys []string
		for _, h := range hs {
			if vs := h.header.Values("Idempotency-Key"); len(vs) != 1 {
				t.Fatalf("%s: Idempotency-Key header values %q, want exactly one", path, vs)
			}
			keys = append(keys, h.header.Get("Idempotency-Key"))
		}
		return keys
	}
	keysA, keysB, keysOwn := keysOf("/a", 3), keysOf("/b", 2), keysOf("/own", 2)
	for name, keys := range map[string][]string{"a": keysA, "b": keysB} {
		if keys[0] == "" {
			t.Errorf("%s: empty Idempotency-Key", name)
		}
		for i, k := range keys {
			if k != keys[0] {
				t.Errorf("%s: attempt %d sent key %q, attempt 1 sent %q", name, i+1, k, keys[0])
			}
		}
		// The key the server saw is the one the engine recorded, so it
		// survives a resume.
		if rec := activityRecord(t, store, "w", "k", name); rec.IdempotencyKey != keys[0] {
			t.Errorf("%s: stored idempotency key %q, server saw %q", name, rec.IdempotencyKey, keys[0])
		}
	}
	if keysA[0] == keysB[0] {
		t.Errorf("activities a and b share the Idempotency-Key %q", keysA[0])
	}
	for i, k := range keysOwn {
		if k != "mine-42" {
			t.Errorf("own: attempt %d sent Idempotency-Key %q, want the configured %q", i+1, k, "mine-42")
		}
	}
	// attempt_started carries the engine's key for every attempt.
	for _, ev := range rec.of(event.AttemptStarted, "activity.a") {
		if ev.IdempotencyKey != keysA[0] {
			t.Errorf("attempt_started %d: key %q, want %q", ev.Attempt, ev.IdempotencyKey, keysA[0])
		}
	}
}

// ---- 3. non_retryable_errors with a wildcard ----------------------------

func TestRetryFeaturesHTTP4xxNonRetryable(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/missing": {{404, ""}},
		"/busy":    {{503, ""}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

retry_policy "api" {
  backoff              = "fixed"
  initial_interval     = "10ms"
  maximum_attempts     = 5
  non_retryable_errors = ["http:4*"]
}

workflow "w" {
  key = "k"
  activity "missing" {
    http { url = "${var.base}/missing" }
    retry = retry_policy.api
  }
  activity "busy" {
    http { url = "${var.base}/busy" }
    retry = retry_policy.api
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	if n := len(srv.hitsOf("/missing")); n != 1 {
		t.Errorf("404: %d requests, want exactly 1", n)
	}
	ev := activityFailed(t, rec, "missing")
	if ev.Reason != event.ReasonNonRetryable || ev.Error == nil || ev.Error.Type != "http:404" || ev.Attempt != 1 {
		t.Errorf("activity_failed = reason %q error %+v attempt %d, want non_retryable http:404 after attempt 1", ev.Reason, ev.Error, ev.Attempt)
	}
	if n := len(rec.of(event.RetryScheduled, "activity.missing")); n != 0 {
		t.Errorf("404 scheduled %d retries", n)
	}
	if n := len(srv.hitsOf("/busy")); n != 2 {
		t.Errorf("503: %d requests, want 2 (retried once, then 200)", n)
	}
	if r := activityRecord(t, store, "w", "k", "busy"); r.Status != record.StatusSucceeded || r.Attempts != 2 {
		t.Errorf("busy: status %s after %d attempts, want succeeded after 2", r.Status, r.Attempts)
	}
	if r := activityRecord(t, store, "w", "k", "missing"); r.Status != record.StatusFailed || r.FailReason != event.ReasonNonRetryable {
		t.Errorf("missing: status %s reason %q, want failed non_retryable", r.Status, r.FailReason)
	}
}

// ---- 6. retry_if --------------------------------------------------------

func TestRetryFeaturesRetryIf(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{"/down": {{503, ""}}})
	s := newStack(t, `
variable "base" { type = string }

workflow "w" {
  key = "k"
  # Unlimited attempts: only retry_if stops it.
  activity "counted" {
    http { url = "${var.base}/down" }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      retry_if         = attempt < 3
    }
  }
  activity "fraud" {
    exec {
      script = <<-EOT
        printf '{"type":"Fraud","message":"stolen card"}' > "$WF_ERROR_FILE"
        exit 1
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 5
      retry_if         = error.type != "Fraud"
    }
  }
  # The control: the same predicate lets other error types through.
  activity "other" {
    exec {
      script = <<-EOT
        printf '{"type":"Glitch"}' > "$WF_ERROR_FILE"
        exit 1
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 3
      retry_if         = error.type != "Fraud"
    }
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	if n := len(srv.hitsOf("/down")); n != 3 {
		t.Errorf("counted: %d requests, want exactly 3", n)
	}
	tests := []struct {
		name     string
		attempts int
		reason   string
		errType  string
	}{
		{"counted", 3, event.ReasonRetryIf, "http:503"},
		{"fraud", 1, event.ReasonRetryIf, "Fraud"},
		{"other", 3, event.ReasonMaxAttempts, "Glitch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := activityFailed(t, rec, tt.name)
			if ev.Reason != tt.reason || ev.Attempt != tt.attempts || ev.Error == nil || ev.Error.Type != tt.errType {
				t.Errorf("activity_failed: reason %q attempt %d error %+v, want %s after %d attempts with %s", ev.Reason, ev.Attempt, ev.Error, tt.reason, tt.attempts, tt.errType)
			}
			if n := len(attemptsOf(t, store, "w", "k", tt.name)); n != tt.attempts {
				t.Errorf("%d stored attempts, want %d", n, tt.attempts)
			}
			if n := len(rec.of(event.AttemptStarted, "activity."+tt.name)); n != tt.attempts {
				t.Errorf("%d attempt_started events, want %d", n, tt.attempts)
			}
		})
	}
}

// ---- 7. the error file --------------------------------------------------

func TestRetryFeaturesErrorFile(t *testing.T) {
	t.Parallel()
	s := newStack(t, `
workflow "w" {
  key = "k"
  activity "charge" {
    exec {
      script = <<-EOT
        printf '{"type":"CardDeclined","message":"nope","non_retryable":true}' > "$WF_ERROR_FILE"
        exit 1
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 5
    }
  }
}
`)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	want := event.Error{Type: "CardDeclined", Message: "nope", NonRetryable: true}
	failed := rec.of(event.AttemptFailed, "activity.charge")
	if len(failed) != 1 || failed[0].Attempt != 1 || failed[0].Error == nil || *failed[0].Error != want {
		t.Fatalf("attempt_failed events = %+v, want one for attempt 1 with %+v", failed, want)
	}
	ev := activityFailed(t, rec, "charge")
	if ev.Reason != event.ReasonNonRetryable || ev.Error == nil || ev.Error.Type != "CardDeclined" {
		t.Errorf("activity_failed: reason %q error %+v, want non_retryable CardDeclined", ev.Reason, ev.Error)
	}
	atts := attemptsOf(t, store, "w", "k", "charge")
	if len(atts) != 1 {
		t.Fatalf("%d stored attempts, want 1", len(atts))
	}
	a := atts[0]
	if a.Outcome != record.OutcomeFailed || a.Error == nil || *a.Error != (record.Error{Type: "CardDeclined", Message: "nope", NonRetryable: true}) || a.HasWait {
		t.Errorf("stored attempt = %+v error %+v, want failed CardDeclined/nope/non-retryable with no wait", a, a.Error)
	}
	if r := activityRecord(t, store, "w", "k", "charge"); r.FailReason != event.ReasonNonRetryable || r.LastError == nil || r.LastError.Type != "CardDeclined" {
		t.Errorf("stored activity: reason %q last error %+v", r.FailReason, r.LastError)
	}
}

// ---- 8. ordered rules ---------------------------------------------------

func TestRetryFeaturesOrderedRules(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		// Each rule keeps its own schedule.
		"/schedule": {{429, ""}, {429, ""}, {503, ""}, {503, ""}, {200, ""}},
		// The 429 rule allows 3 and sees its 3rd 429 at attempt 5, while
		// the catch-all rule has used 2 of 10: counted per rule, the run
		// ends at attempt 5; a shared count would end it at attempt 3.
		"/bounded": {{503, ""}, {503, ""}, {429, ""}, {429, ""}, {429, ""}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

workflow "w" {
  key = "k"
  activity "schedule" {
    http { url = "${var.base}/schedule" }
    retry {
      on               = ["http:429"]
      backoff          = "fixed"
      initial_interval = "300ms"
      maximum_attempts = 10
    }
    retry {
      backoff          = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 10
    }
  }
  activity "bounded" {
    http { url = "${var.base}/bounded" }
    retry {
      on               = ["http:429"]
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 3
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 10
    }
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed (bounded fails); events:\n%s", out.Status, rec.dump())
	}

	t.Run("each rule has its own schedule", func(t *testing.T) {
		hs := srv.hitsOf("/schedule")
		if len(hs) != 5 {
			t.Fatalf("%d requests, want 5", len(hs))
		}
		want := []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
		for i, g := range gaps(hs) {
			if g < want[i] || g > want[i]+timingSlack {
				t.Errorf("gap before attempt %d = %s, want %s (+%s)", i+2, g, want[i], timingSlack)
			}
		}
		r := activityRecord(t, store, "w", "k", "schedule")
		if r.Status != record.StatusSucceeded || !slices.Equal(r.RuleCounts, []int{2, 2}) {
			t.Errorf("stored: status %s rule counts %v, want succeeded with [2 2]", r.Status, r.RuleCounts)
		}
	})
	t.Run("a rule's maximum_attempts bounds its own count", func(t *testing.T) {
		if n := len(srv.hitsOf("/bounded")); n != 5 {
			t.Errorf("%d requests, want 5 (two 503s, then three 429s)", n)
		}
		ev := activityFailed(t, rec, "bounded")
		if ev.Reason != event.ReasonMaxAttempts || ev.Attempt != 5 || ev.Error == nil || ev.Error.Type != "http:429" {
			t.Errorf("activity_failed: reason %q attempt %d error %+v, want max_attempts at attempt 5 on http:429", ev.Reason, ev.Attempt, ev.Error)
		}
		r := activityRecord(t, store, "w", "k", "bounded")
		if !slices.Equal(r.RuleCounts, []int{3, 2}) {
			t.Errorf("stored rule counts %v, want [3 2]", r.RuleCounts)
		}
	})
}
