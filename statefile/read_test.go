package statefile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// instancesState commits n instances of per activities each (a third
// with a timer, a few with rule counts) and returns the store, open.
func instancesState(t *testing.T, n, per int) *Store {
	t.Helper()
	s := openT(t, t.TempDir()+"/.wf")
	t.Cleanup(func() { closeT(t, s) })
	var muts []record.Mutation
	for i := range n {
		for j := range per {
			a := act("w", fmt.Sprintf("k%d", i), fmt.Sprintf("a%d", j), j%3 == 0)
			if j%4 == 0 {
				a.RuleCounts = []int{j, 1}
			}
			muts = append(muts, record.Mutation{Activity: a})
		}
		if len(muts) >= 1000 || i == n-1 {
			commitT(t, s, muts...)
			muts = muts[:0]
		}
	}
	return s
}

// TestReadsShareNoRecord: the records of consecutive reads are cut from
// the same blocks (one read's decoders go on filling the last one's);
// changing every field of one read's records, appending to its slices
// included, must leave the others' as they were.
func TestReadsShareNoRecord(t *testing.T) {
	s := instancesState(t, 40, 7)
	first := map[string]map[string]*record.Activity{}
	want := map[string]map[string]record.Activity{}
	for i := range 40 {
		key := fmt.Sprintf("k%d", i)
		acts, err := s.Activities("w", key)
		if err != nil {
			t.Fatal(err)
		}
		first[key] = acts
		want[key] = map[string]record.Activity{}
		for name, a := range acts {
			want[key][name] = deepCopy(t, a)
		}
	}
	for i := 0; i < 40; i += 2 {
		for _, a := range first[fmt.Sprintf("k%d", i)] {
			a.Workflow, a.Name, a.Status = "x", "y", record.StatusFailed
			a.RuleCounts = append(a.RuleCounts, 99, 98, 97)
			a.Outputs = append(a.Outputs, `{"clobbered":true}`...)
			if a.Timer != nil {
				a.Timer.Attempt, a.Timer.Source = -1, "z"
			}
			if a.LastError != nil {
				a.LastError.Message = "clobbered"
			}
			*a = record.Activity{Name: "gone"}
		}
	}
	for i := 1; i < 40; i += 2 {
		key := fmt.Sprintf("k%d", i)
		for name, a := range first[key] {
			if got := deepCopy(t, a); !reflect.DeepEqual(got, want[key][name]) {
				t.Fatalf("%s/%s changed by changes to other reads' records:\n got %+v\nwant %+v", key, name, got, want[key][name])
			}
		}
	}
}

func deepCopy(t *testing.T, a *record.Activity) record.Activity {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var c record.Activity
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadsOfSmallInstancesAllocateLittle: reading a state an instance
// at a time (as the executor's start does) allocates about what the
// records keep, not a block of records and a grown string per read.
// Before the blocks and sizes were handed from read to read, 400 reads
// of 10 activities allocated ~13 KB per activity (now ~1 KB).
func TestReadsOfSmallInstancesAllocateLittle(t *testing.T) {
	const instances, per = 400, 10
	s := instancesState(t, instances, per)
	read := func() {
		for i := range instances {
			acts, err := s.Activities("w", fmt.Sprintf("k%d", i))
			if err != nil || len(acts) != per {
				t.Fatalf("k%d: %d activities, %v", i, len(acts), err)
			}
		}
	}
	read() // the pools' first use
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	read()
	runtime.ReadMemStats(&after)
	perActivity := float64(after.TotalAlloc-before.TotalAlloc) / (instances * per)
	t.Logf("%.0f bytes allocated per activity read", perActivity)
	if perActivity > 4096 {
		t.Errorf("reading %d instances of %d activities allocated %.0f bytes per activity, want at most 4096", instances, per, perActivity)
	}
}
