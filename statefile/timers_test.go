package statefile

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

// TestPendingTimersAcrossKeyBatches: the timer index is read in batches
// on a goroutine of its own; over several batches the join returns every
// activity with a timer, in key order, a damaged entry in a later batch
// is still an error, and no reading goroutine outlives the read.
func TestPendingTimersAcrossKeyBatches(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	const n = 3*keyBatchLen + 17
	var muts []record.Mutation
	var want []string
	for i := range n {
		a := act(fmt.Sprint("w", i%2), fmt.Sprintf("k%04d", i/7), fmt.Sprint("a", i%7), i%5 != 0)
		muts = append(muts, record.Mutation{Activity: a})
	}
	commitT(t, s, muts...)
	acts := map[string]bool{}
	for _, m := range muts {
		if a := m.Activity; a.Timer != nil {
			acts[string(appendActivityKey(nil, a.Workflow, a.Instance, a.Name))] = true
		}
	}
	for k := range acts {
		want = append(want, k)
	}
	timers, err := s.PendingTimers()
	if err != nil {
		t.Fatal(err)
	}
	if len(timers) != len(want) || len(want) <= 2*keyBatchLen {
		t.Fatalf("%d timers, want %d (over two batches)", len(timers), len(want))
	}
	for i, a := range timers {
		k := string(appendActivityKey(nil, a.Workflow, a.Instance, a.Name))
		if !acts[k] || i > 0 && k <= string(appendActivityKey(nil, timers[i-1].Workflow, timers[i-1].Instance, timers[i-1].Name)) {
			t.Fatalf("timer %d: %s/%s/%s out of order or without a timer", i, a.Workflow, a.Instance, a.Name)
		}
	}

	before := runtime.NumGoroutine()
	if err := s.w.waitApplied(); err != nil {
		t.Fatal(err)
	}
	// In the last batch: an entry without its activity.
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(timerKey("w1", "k9999", "orphan"), nil) }); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.PendingTimers(); err == nil || !strings.Contains(err.Error(), "timer index entry without its activity") {
			t.Fatalf("orphan timer entry: %v", err)
		}
	}
	// In the first batch: the join stops there, the reader must too.
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(timerKey("w0", "k0000", "a00"), nil) }); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.PendingTimers(); err == nil || !strings.Contains(err.Error(), `"w0"/"k0000"/"a00": timer index entry without its activity`) {
			t.Fatalf("orphan timer entry in the first batch: %v", err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before the failed reads, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadMixesSmallAndLargeRecords: a chunk keeps records of up to
// sharedMax bytes in one string and larger ones in a buffer reused by
// later chunks; over several chunks, with large records among small ones,
// every record reads back as it was written, and a large record's fields
// hold no bytes of that reused buffer (a later read would overwrite them).
func TestReadMixesSmallAndLargeRecords(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	const n = 3*rawChunkSize + 40
	var muts []record.Mutation
	want := map[string]*record.Activity{}
	for i := range n {
		a := act("w", "k", fmt.Sprintf("a%04d", i), i%3 != 0)
		if i%17 == 0 {
			a.Outputs = []byte(fmt.Sprintf(`{"result":%q}`, strings.Repeat(fmt.Sprint(i%10), sharedMax+i)))
			a.DefHash = strings.Repeat("h", 300) + fmt.Sprint(i)
		}
		muts = append(muts, record.Mutation{Activity: a})
		want[a.Name] = a
	}
	commitT(t, s, muts...)
	first, err := s.Activities("w", "k")
	if err != nil {
		t.Fatal(err)
	}
	// A second read reuses the buffers of the first.
	if _, err := s.Activities("w", "k"); err != nil {
		t.Fatal(err)
	}
	timers, err := s.PendingTimers()
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != n || len(timers) != n-(n+2)/3 {
		t.Fatalf("%d activities, %d timers", len(first), len(timers))
	}
	check := func(got *record.Activity) {
		t.Helper()
		w := want[got.Name]
		wb, _ := record.Encode(w)
		gb, err := record.Encode(got)
		if err != nil || string(gb) != string(wb) {
			t.Fatalf("%s reads back as %+v, want %+v (%v)", got.Name, got, w, err)
		}
	}
	for _, a := range first {
		check(a)
	}
	for _, a := range timers {
		check(a)
	}
}
