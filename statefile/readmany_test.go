package statefile

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

// manyState commits, for workflow "w", instances k00..k59 with i%7*20
// activities each (k00, k07, ... have none, k07 has an instance record
// only), and neighbours that must not leak into w's reads: workflow "w2"
// and "w\x00" (whose escaped names sort right after w's), instance keys
// that extend others ("k1", "k1/x"), names with NUL bytes, and "big",
// with 2,000 activities (its records in several of a read's chunks).
func manyState(t *testing.T) *Store {
	t.Helper()
	s := openT(t, t.TempDir()+"/.wf")
	t.Cleanup(func() { closeT(t, s) })
	var muts []record.Mutation
	flush := func() {
		commitT(t, s, muts...)
		muts = muts[:0]
	}
	add := func(wf, key string, n int) {
		for j := range n {
			muts = append(muts, record.Mutation{Activity: act(wf, key, fmt.Sprintf("a%03d", j), j%2 == 0)})
		}
		if len(muts) >= 500 {
			flush()
		}
	}
	for i := range 60 {
		add("w", fmt.Sprintf("k%02d", i), i%7*20)
	}
	muts = append(muts, record.Mutation{Instance: inst("w", "k07")})
	add("w", "big", 2_000) // over several chunks
	add("w", "k1", 3)
	add("w", "k1/x", 2)
	add("w", "nul\x00key", 4)
	add("w2", "k01", 5)
	add("w\x00", "k01", 6)
	add("wx", "k02", 7)
	flush()
	return s
}

func TestActivitiesOf(t *testing.T) {
	s := manyState(t)
	every := func(step int) []string {
		var keys []string
		for i := 0; i < 60; i += step {
			keys = append(keys, fmt.Sprintf("k%02d", i))
		}
		return keys
	}
	tests := []struct {
		name     string
		workflow string
		keys     []string
	}{
		{"every instance", "w", every(1)},
		{"every instance, backwards", "w", backwards(every(1))},
		// Runs of up to 120 records not asked for between two asked for:
		// stepped over or sought past.
		{"every third", "w", every(3)},
		{"every eleventh", "w", every(11)},
		{"one of many", "w", []string{"k34"}},
		{"one over several chunks", "w", []string{"big"}},
		{"one over several chunks and its neighbours", "w", []string{"k58", "big", "k59", "k1"}},
		{"the last", "w", []string{"k59"}},
		{"without activities", "w", []string{"k00", "k07", "k14"}},
		{"absent", "w", []string{"nope", "k99", ""}},
		{"asked for twice", "w", []string{"k05", "k05", "k04"}},
		{"keys that extend others", "w", []string{"k1", "k1/x", "k10", "nul\x00key", "nul"}},
		{"other workflows", "w2", []string{"k01", "k02"}},
		{"a workflow with a NUL", "w\x00", []string{"k01"}},
		{"a workflow not in the state", "v", []string{"k01"}},
		{"no keys", "w", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ActivitiesOf(tt.workflow, tt.keys)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]*record.Activity{}
			for _, k := range tt.keys {
				acts, err := s.Activities(tt.workflow, k)
				if err != nil {
					t.Fatal(err)
				}
				want[k] = acts
			}
			if len(got) != len(want) {
				t.Fatalf("%d instances, want %d", len(got), len(want))
			}
			for k, acts := range want {
				if got[k] == nil {
					t.Fatalf("instance %q: nil map", k)
				}
				if !reflect.DeepEqual(got[k], acts) {
					t.Fatalf("instance %q: %d activities, want %d (as Activities reads them)", k, len(got[k]), len(acts))
				}
				for name, a := range got[k] {
					if a.Workflow != tt.workflow || a.Instance != k || a.Name != name {
						t.Fatalf("instance %q: %s/%s/%s under %q", k, a.Workflow, a.Instance, a.Name, name)
					}
				}
			}
		})
	}
}

// TestActivitiesOfDamage: a record that does not decode, or is stored
// under another activity's key, is an error naming the key, whichever
// other instances are read with it; so is a closed store.
func TestActivitiesOfDamage(t *testing.T) {
	s := manyState(t)
	poke := func(k, v []byte) {
		if err := s.w.waitApplied(); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
			t.Fatal(err)
		}
	}
	poke(activityKey("w", "k08", "bad"), []byte(`{"workflow":"w"`))
	moved, err := record.Encode(act("w", "k09", "a000", false))
	if err != nil {
		t.Fatal(err)
	}
	poke(activityKey("w", "k10", "a000"), moved)
	tests := []struct {
		name string
		keys []string
		want string
	}{
		{"does not decode", []string{"k01", "k08", "k20"}, `record activity "w"/"k08"/"bad": decode activity`},
		{"does not decode, alone", []string{"k08"}, `record activity "w"/"k08"/"bad": decode activity`},
		{"stored under another key", []string{"k09", "k10"}, `record activity "w"/"k10"/"a000": activity record is for "w/k09/a000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ActivitiesOf("w", tt.keys)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// The instances without damage still read.
	if got, err := s.ActivitiesOf("w", []string{"k01", "k20"}); err != nil || len(got["k01"]) != 20 || len(got["k20"]) != 120 {
		t.Fatalf("undamaged instances: %d and %d activities, %v", len(got["k01"]), len(got["k20"]), err)
	}
	closeT(t, s) // and again by the cleanup: a no-op
	if _, err := s.ActivitiesOf("w", []string{"k01"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed store: %v, want ErrClosed", err)
	}
}

// TestActivitiesOfReader: a read-only Store reads the same.
func TestActivitiesOfReader(t *testing.T) {
	s := manyState(t)
	dir := s.dir
	want, err := s.ActivitiesOf("w", []string{"k01", "k02", "k03", "k07"})
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, s) // and again by the cleanup: a no-op
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ro.ActivitiesOf("w", []string{"k01", "k02", "k03", "k07"})
	closeT(t, ro)
	if err != nil || !reflect.DeepEqual(deepCopies(t, got), deepCopies(t, want)) {
		t.Fatalf("reader: %v", err)
	}
}

func deepCopies(t *testing.T, m map[string]map[string]*record.Activity) map[string]map[string]record.Activity {
	out := map[string]map[string]record.Activity{}
	for k, acts := range m {
		out[k] = map[string]record.Activity{}
		for name, a := range acts {
			out[k][name] = deepCopy(t, a)
		}
	}
	return out
}

func backwards(keys []string) []string {
	slices.Reverse(keys)
	return keys
}
