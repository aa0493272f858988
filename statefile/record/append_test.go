package record

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendMatchesEncode: AppendAttempt and AppendActivity append what
// Encode returns, after what b held, and refuse what it refuses with the
// same error.
func TestAppendMatchesEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	encoded := 0
	check := func(v any, got []byte, err error) {
		t.Helper()
		if err == nil {
			encoded++
		}
		want, werr := Encode(v)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("%+v: error %v, Encode's %v", v, err, werr)
		}
		if err == nil && (!bytes.HasPrefix(got, []byte("key")) || !bytes.Equal(got[3:], want)) {
			t.Fatalf("appended\n%q\nEncode\n%q", got, want)
		}
	}
	valid := func(w, i, a string) (string, string, string) {
		if w == "" {
			w = "w"
		}
		if i == "" {
			i = "i"
		}
		if a == "" {
			a = "a"
		}
		return w, i, a
	}
	for n := range 3000 {
		at := randAttempt(r)
		if n%2 == 0 {
			at.Workflow, at.Instance, at.Activity = valid(at.Workflow, at.Instance, at.Activity)
			at.Outcome = OutcomeFailed
			if o := at.Output; o != nil {
				o.StdoutBytes, o.StderrBytes, o.BodyBytes = max(o.StdoutBytes, 0), max(o.StderrBytes, 0), max(o.BodyBytes, 0)
			}
		}
		got, err := AppendAttempt([]byte("key"), at)
		check(at, got, err)
		ac := randActivity(r)
		if n%2 == 0 {
			ac.Workflow, ac.Instance, ac.Name = valid(ac.Workflow, ac.Instance, ac.Name)
			ac.Status, ac.Attempts, ac.Interrupted, ac.RuleCounts = StatusWaiting, max(ac.Attempts, 0), max(ac.Interrupted, 0), nil
			if ac.Timer != nil {
				ac.Timer.Kind = TimerRetry
			}
		}
		got, err = AppendActivity([]byte("key"), ac)
		check(ac, got, err)
	}
	far := &Attempt{Workflow: "w", Instance: "i", Activity: "a", Start: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	got, err := AppendAttempt([]byte("key"), far)
	check(far, got, err)
	var nilAttempt *Attempt
	got, err = AppendAttempt([]byte("key"), nilAttempt)
	check(nilAttempt, got, err)
	var nilActivity *Activity
	got, err = AppendActivity([]byte("key"), nilActivity)
	check(nilActivity, got, err)
	if encoded < 1000 {
		t.Fatalf("only %d of 6,000 random records were valid: the test checks too little", encoded)
	}
}
