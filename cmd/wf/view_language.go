package main

import (
	"fmt"
	"strings"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// fmtLanguageEvent is the plain line of the events for_each, moved and
// removed activities and outputs add.
func fmtLanguageEvent(e event.Event) string {
	switch e.Type {
	case event.ActivityRemoved:
		s := e.Activity + ": " + removedWhy(e.Reason) + "; its state was forgotten"
		if e.Error != nil && e.Error.Message != "" {
			s += " (" + e.Error.Message + ")"
		}
		return s
	case event.ActivityMoved:
		return fmt.Sprintf("%s: state moved from %s", e.Activity, e.From)
	case event.ActivityExpanded:
		return fmt.Sprintf("%s: for_each known: %d %s", e.Activity, len(e.Activities), plural(len(e.Activities), "element", "elements"))
	case event.OutputKnown:
		if e.Value == nil {
			return ""
		}
		switch {
		case e.Error != nil:
			return fmt.Sprintf("output %s: error: %s", e.Value.Name, oneLine(e.Error.Message, 200))
		case e.Value.Sensitive:
			return fmt.Sprintf("output %s = %s", e.Value.Name, config.Redacted)
		}
		return fmt.Sprintf("output %s = %s", e.Value.Name, oneLine(string(e.Value.Value), 200))
	}
	return ""
}

// removedWhy says in words why an activity's state was forgotten.
func removedWhy(reason string) string {
	switch reason {
	case "removed_from_configuration":
		return "removed from configuration"
	case "not_in_for_each":
		return "no longer in for_each"
	case "for_each_added":
		return "now has for_each"
	case "for_each_removed":
		return "no longer has for_each"
	}
	return fmtReason(reason)
}

// namesIn is what `wf history INSTANCE ACTIVITY` shows, from the
// instance's records: the activity, one element as named, or for an
// activity with for_each every element in state.
func namesIn(acts map[string]*record.Activity, wf, key, activity string) ([]string, error) {
	if strings.Contains(activity, "[") {
		return []string{activity}, nil
	}
	if _, ok := acts[activity]; ok {
		return []string{activity}, nil
	}
	var names []string
	var all []string
	for _, a := range sortedActivities(acts) {
		all = append(all, a.Name)
		if b, _, isElem := config.SplitName(a.Name); isElem && b == activity {
			names = append(names, a.Name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("activity.%s is not in the state of %s/%s.%s", activity, wf, key, didYouMean(activity, all))
	}
	return names, nil
}
