package core

import (
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// TestEventsSayWhichRuleSpeaks: with ordered rules, every event names the
// rule whose limit MaxAttempts is and what the rules have counted, so a
// view can show "attempt 3 · http:429 rule 2/10" rather than a limit that
// jumps from 5 to 10 without a word. After a resume the rule is found again
// from the last error.
func TestEventsSayWhichRuleSpeaks(t *testing.T) {
	rules := []retry.Rule{
		{On: []string{"http:429"}, Policy: expo(time.Second, 10)},
		{Policy: expo(time.Second, 5)},
	}
	w := &world{wf: workflow(execAct("charge", rules))}
	h := newHarness(t, w, nil, t0)
	r := h.start()
	started := eventsOf(r, event.AttemptStarted)
	if len(started) != 1 || started[0].Rule == nil || started[0].Rule.Index != 0 || started[0].Rule.Rules != 2 || started[0].MaxAttempts != 5 {
		t.Fatalf("first attempt_started: rule %+v max %d, want no rule spoken yet", started[0].Rule, started[0].MaxAttempts)
	}

	steps := []struct {
		err        string
		index, cnt int
		all, max   int
		on         string
	}{
		{"http:503", 2, 1, 1, 5, ""},
		{"http:429", 1, 1, 2, 10, "http:429"},
		{"http:429", 1, 2, 3, 10, "http:429"},
	}
	for i, st := range steps {
		h.at(time.Duration(i*100) * time.Second)
		r = h.finish("charge", fail(st.err))
		for _, ev := range r.Events {
			if ev.Activity == "" {
				continue
			}
			got := ev.Rule
			if got == nil {
				t.Fatalf("failure %d, %s: no rule", i+1, ev.Type)
			}
			if got.Index != st.index || got.Counted != st.cnt || got.CountedAll != st.all || got.Rules != 2 ||
				strings.Join(got.On, ",") != st.on || ev.MaxAttempts != st.max {
				t.Fatalf("failure %d (%s), %s: rule %+v max %d; want rule %d counted %d of all %d, max %d",
					i+1, st.err, ev.Type, got, ev.MaxAttempts, st.index, st.cnt, st.all, st.max)
			}
		}
		if i < len(steps)-1 {
			h.at(time.Duration(i*100+50) * time.Second)
			h.tick()
		}
	}

	// A new core over the same state, with the retry pending (a resume),
	// finds the 429 rule again.
	h2 := newHarness(t, w, h.state, h.now)
	r = h2.start()
	if len(eventsOf(r, event.TimerRecovered)) != 1 {
		t.Fatalf("resume events %v, want a timer_recovered", types(r))
	}
	for _, ev := range r.Events {
		if ev.Activity != "" && (ev.Rule == nil || ev.Rule.Index != 1 || ev.Rule.Counted != 2 || ev.MaxAttempts != 10) {
			t.Fatalf("after resume, %s: rule %+v max %d, want the 429 rule with 2 counted", ev.Type, ev.Rule, ev.MaxAttempts)
		}
	}
}

// TestAttemptEventsCarryOutputTail: the attempt's end events carry what it
// printed, cut to event.OutputTail per stream at a line boundary.
func TestAttemptEventsCarryOutputTail(t *testing.T) {
	w := &world{wf: workflow(execAct("a", []retry.Rule{{Policy: expo(time.Second, 3)}}))}
	h := newHarness(t, w, nil, t0)
	h.start()
	res := h.result("a", fail("exit:1"))
	long := strings.Repeat("line of stderr\n", 1000)
	res.Outputs = []byte(`{"stdout":"hello\n","stderr":` + quote(long) + `,"exit_code":1}`)
	r := h.record(h.c.AttemptsDone(h.now, []Result{res}))
	failed := eventsOf(r, event.AttemptFailed)
	if len(failed) != 1 || failed[0].Output == nil {
		t.Fatalf("attempt_failed without output: %+v", failed)
	}
	o := failed[0].Output
	if o.Stdout != "hello\n" || o.StdoutBytes != 6 || o.StderrBytes != len(long) ||
		len(o.Stderr) > event.OutputTail || !strings.HasPrefix(o.Stderr, "line of stderr\n") || !strings.HasSuffix(long, o.Stderr) {
		t.Fatalf("output %q (%d bytes of stderr kept of %d)", o.Stdout, len(o.Stderr), o.StderrBytes)
	}
	for _, ev := range r.Events {
		if ev.Type != event.AttemptFailed && ev.Output != nil {
			t.Fatalf("%s carries output too", ev.Type)
		}
	}
	// The attempt record keeps the same tail (wf history -output).
	if att := h.state.attempts[attKey("order/k1", "a", 1, 1)]; att == nil || att.Output == nil ||
		record.Output(*o) != *att.Output {
		t.Fatalf("attempt record output %+v, want the event's", att)
	}
	h.at(2 * time.Second)
	h.tick()
	r = h.finish("a", nil) // the harness's success prints "ok"
	if ok := eventsOf(r, event.AttemptSucceeded); len(ok) != 1 || ok[0].Output == nil || ok[0].Output.Stdout != "ok" {
		t.Fatalf("attempt_succeeded output: %+v", ok)
	}
	if att := h.state.attempts[attKey("order/k1", "a", 1, 2)]; att == nil || att.Output == nil || att.Output.Stdout != "ok" {
		t.Fatalf("attempt 2 record output %+v", att)
	}
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "\n", `\n`) + `"`
}
