package executor

import (
	"reflect"
	"testing"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/statefile/record"
)

// oneByOneStore is a Store with only the required methods: Start reads
// its instances one at a time (Activities).
type oneByOneStore struct{ s *memStore }

func (o oneByOneStore) Activities(workflow, key string) (map[string]*record.Activity, error) {
	return o.s.Activities(workflow, key)
}
func (o oneByOneStore) Budgets() (map[string]*record.Budget, error) { return o.s.Budgets() }
func (o oneByOneStore) Commit(ms []record.Mutation) error           { return o.s.Commit(ms) }

// TestLoadActivities: a store that reads many instances at once is asked
// once per workflow for every instance of it (an instance without
// activities gets an empty map); one that cannot is left to the read per
// instance; an instance without a workflow is an error either way.
func TestLoadActivities(t *testing.T) {
	st := newMemStore()
	st.acts["w/k1"] = map[string]*record.Activity{"a": {Workflow: "w", Instance: "k1", Name: "a"}}
	st.acts["w/k2"] = map[string]*record.Activity{"a": {Workflow: "w", Instance: "k2", Name: "a"}, "b": {Workflow: "w", Instance: "k2", Name: "b"}}
	st.acts["v/k1"] = map[string]*record.Activity{"c": {Workflow: "v", Instance: "k1", Name: "c"}}
	inst := func(name, key string) core.Instance {
		return core.Instance{Workflow: &config.Workflow{Name: name, Key: key}}
	}
	all := []core.Instance{inst("w", "k1"), inst("v", "k1"), inst("w", "k2"), inst("w", "none")}

	got, err := loadActivities(st, all)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]map[string]*record.Activity{
		"w": {"k1": st.acts["w/k1"], "k2": st.acts["w/k2"], "none": {}},
		"v": {"k1": st.acts["v/k1"]},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
	if got["w"]["none"] == nil {
		t.Fatal("an instance without activities has a nil map")
	}

	if got, err := loadActivities(oneByOneStore{st}, all); err != nil || got != nil {
		t.Fatalf("store without ActivitiesOf: %v, %v; want nil, nil", got, err)
	}
	for _, s := range []Store{st, oneByOneStore{st}} {
		if _, err := loadActivities(s, []core.Instance{inst("w", "k1"), {}}); err == nil {
			t.Fatalf("%T: an instance without a workflow loaded", s)
		}
	}
}
