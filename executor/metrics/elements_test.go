package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
)

// TestElementsShareTheirActivitysSeries: the elements of an activity with
// for_each count under the activity's name, without the key, while each
// element's attempt is tracked on its own (running attempts, durations).
func TestElementsShareTheirActivitysSeries(t *testing.T) {
	f := newFeed()
	f.send(event.Event{Time: t0, Type: event.Plan, Workflow: "w", Instance: "w/k", Activities: []event.ActivityInfo{
		{Activity: `activity.fetch["a"]`, Block: "activity.fetch", Action: "run"},
		{Activity: `activity.fetch["b"]`, Block: "activity.fetch", Action: "run"},
	}})
	f.send(f.ev(event.AttemptStarted, `fetch["a"]`, 1), f.ev(event.AttemptStarted, `fetch["b"]`, 1))
	expect(t, "both running", f.scrape(t), map[string]float64{"wf_running_attempts{}": 2})
	f.at(time.Second)
	f.send(
		f.ev(event.AttemptSucceeded, `fetch["a"]`, 1, dur(time.Second)), f.ev(event.ActivitySucceeded, `fetch["a"]`, 1),
		f.ev(event.AttemptFailed, `fetch["b"]`, 1, errOf("exit:1"), dur(time.Second)), f.ev(event.ActivityFailed, `fetch["b"]`, 1, func(e *event.Event) { e.Reason = "max_attempts" }),
	)
	s := f.scrape(t)
	expect(t, "ended", s, map[string]float64{
		"wf_attempts_total{workflow=w,activity=activity.fetch,outcome=succeeded}":                   1,
		"wf_attempts_total{workflow=w,activity=activity.fetch,outcome=failed}":                      1,
		"wf_attempt_duration_seconds_count{workflow=w,activity=activity.fetch}":                     2,
		"wf_activities_total{workflow=w,activity=activity.fetch,status=succeeded,reason=}":          1,
		"wf_activities_total{workflow=w,activity=activity.fetch,status=failed,reason=max_attempts}": 1,
		"wf_running_attempts{}": 0,
	})
	for k := range s {
		if strings.Contains(k, "[") {
			t.Errorf("a label carries a key: %s", k)
		}
	}
}
