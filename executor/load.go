package executor

import (
	"errors"
	"fmt"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/statefile/record"
)

// activitiesOfReader is optionally implemented by a Store (statefile
// does): the activities of many instances of a workflow in one read (by
// instance key, then name; an empty map for an instance without any).
// Start reads every instance it runs so: a read per instance cost
// statefile ~10 µs before its first record and decoded it on one CPU.
type activitiesOfReader interface {
	ActivitiesOf(workflow string, keys []string) (map[string]map[string]*record.Activity, error)
}

// loadActivities reads the activities of every instance in one read per
// workflow when the store can (activitiesOfReader), by workflow name and
// instance key; nil otherwise, and Start reads each instance on its own.
func loadActivities(st Store, instances []core.Instance) (map[string]map[string]map[string]*record.Activity, error) {
	keys := map[string][]string{} // by workflow name
	var names []string            // in the order first run
	for _, in := range instances {
		if in.Workflow == nil {
			return nil, errors.New("start run: instance without a workflow")
		}
		name := in.Workflow.Name
		if _, ok := keys[name]; !ok {
			names = append(names, name)
		}
		keys[name] = append(keys[name], in.Workflow.Key)
	}
	ar, ok := st.(activitiesOfReader)
	if !ok {
		return nil, nil
	}
	out := make(map[string]map[string]map[string]*record.Activity, len(names))
	for _, name := range names {
		acts, err := ar.ActivitiesOf(name, keys[name])
		if err != nil {
			return nil, fmt.Errorf("load state of workflow %s: %w", name, err)
		}
		out[name] = acts
	}
	return out, nil
}
