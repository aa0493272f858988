package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 500, time.UTC)

func openT(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{Command: "wf test"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func closeT(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func commitT(t testing.TB, s *Store, muts ...record.Mutation) {
	t.Helper()
	if err := s.Commit(muts); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func act(wf, key, name string, timer bool) *record.Activity {
	a := &record.Activity{Workflow: wf, Instance: key, Name: name, Generation: 1,
		DefHash: "h-" + name, IdempotencyKey: "wf1-" + name, Status: record.StatusSucceeded,
		Attempts: 1, FirstStart: t0, Outputs: json.RawMessage(`{"result":{"ok":true}}`), Finished: t0.Add(time.Second)}
	if timer {
		a.Status = record.StatusWaiting
		a.Timer = &record.Timer{Kind: record.TimerRetry, FireAt: t0.Add(time.Minute), Attempt: 2, Set: t0, Delay: time.Minute, Source: "policy"}
		a.Finished = time.Time{}
		a.LastError = &record.Error{Type: "http:503", Message: "busy"}
	}
	return a
}

func att(wf, key, activity string, gen, num int) *record.Attempt {
	return &record.Attempt{Workflow: wf, Instance: key, Activity: activity, Generation: gen, Number: num,
		IdempotencyKey: "wf1-x", Start: t0.Add(time.Duration(num) * time.Second), End: t0.Add(time.Duration(num)*time.Second + time.Millisecond),
		Outcome: record.OutcomeFailed, Error: &record.Error{Type: "exit:1"}, Wait: time.Second, HasWait: true, WaitSource: "policy"}
}

func inst(wf, key string) *record.Instance {
	return &record.Instance{Workflow: wf, Key: key, Created: t0, Updated: t0.Add(time.Hour)}
}

func TestRoundTripEveryRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	s := openT(t, dir)
	i := inst("order", "order-1001")
	a1, a2 := act("order", "order-1001", "charge_card", true), act("order", "order-1001", "ship", false)
	at := att("order", "order-1001", "charge_card", 1, 1)
	b := &record.Budget{Name: "payment_api", Stamps: []time.Time{t0, t0.Add(time.Second)}}
	br := &record.Breaker{Name: "payment_api", State: "open", Since: t0, HalfOpenAt: t0.Add(30 * time.Second), Epoch: 1}
	commitT(t, s, record.Mutation{Instance: i}, record.Mutation{Activity: a1}, record.Mutation{Activity: a2},
		record.Mutation{Attempt: at}, record.Mutation{Budget: b}, record.Mutation{Breaker: br})
	closeT(t, s)

	s = openT(t, dir)
	defer closeT(t, s)
	tests := []struct {
		name string
		get  func() (any, error)
		want any
	}{
		{"instance", func() (any, error) { return s.Instance("order", "order-1001") }, i},
		{"instances", func() (any, error) { return s.Instances() }, []*record.Instance{i}},
		{"activities", func() (any, error) { return s.Activities("order", "order-1001") },
			map[string]*record.Activity{"charge_card": a1, "ship": a2}},
		{"attempts", func() (any, error) { return s.Attempts("order", "order-1001", "charge_card") }, []*record.Attempt{at}},
		{"budgets", func() (any, error) { return s.Budgets() }, map[string]*record.Budget{"payment_api": b}},
		{"breakers", func() (any, error) { return s.Breakers() }, map[string]*record.Breaker{"payment_api": br}},
		{"timers", func() (any, error) { return s.PendingTimers() }, []*record.Activity{a1}},
		{"absent instance", func() (any, error) { return s.Instance("order", "nope") }, (*record.Instance)(nil)},
		{"no activities", func() (any, error) { return s.Activities("order", "nope") }, map[string]*record.Activity{}},
		{"no attempts", func() (any, error) { return s.Attempts("order", "order-1001", "ship") }, ([]*record.Attempt)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %s\nwant %s", dump(got), dump(tt.want))
			}
		})
	}
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAttemptOrderingIsNumeric(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	var muts []record.Mutation
	for _, name := range []string{"b", "a", "a/b", "a\x00"} {
		for gen := 1; gen <= 11; gen++ {
			for num := 1; num <= 12; num++ {
				muts = append(muts, record.Mutation{Attempt: att("w", "k", name, gen, num)})
			}
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(muts), func(i, j int) { muts[i], muts[j] = muts[j], muts[i] })
	commitT(t, s, muts...)

	tests := []struct {
		activity  string
		wantNames []string
	}{
		{"a", []string{"a"}},
		{"a/b", []string{"a/b"}},
		{"b", []string{"b"}},
		{"", []string{"a", "a\x00", "a/b", "b"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.activity), func(t *testing.T) {
			got, err := s.Attempts("w", "k", tt.activity)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, n := range tt.wantNames {
				for gen := 1; gen <= 11; gen++ {
					for num := 1; num <= 12; num++ {
						want = append(want, fmt.Sprintf("%s %d %d", n, gen, num))
					}
				}
			}
			var have []string
			for _, a := range got {
				have = append(have, fmt.Sprintf("%s %d %d", a.Activity, a.Generation, a.Number))
			}
			if !reflect.DeepEqual(have, want) {
				t.Fatalf("order:\n got %q\nwant %q", have, want)
			}
		})
	}
}

func TestNamesWithSlashesDoNotCollide(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	commitT(t, s,
		record.Mutation{Instance: inst("a/b", "c")},
		record.Mutation{Instance: inst("a", "b/c")},
		record.Mutation{Activity: act("a/b", "c", "x", false)},
		record.Mutation{Activity: act("a", "b/c", "x", true)},
		record.Mutation{Activity: act("a", "b", "c/x", true)},
		record.Mutation{Attempt: att("a/b", "c", "x", 1, 1)},
		record.Mutation{Attempt: att("a", "b/c", "x", 1, 2)},
	)
	tests := []struct {
		wf, key       string
		wantActs      int
		wantAttemptNo int
	}{
		{"a/b", "c", 1, 1},
		{"a", "b/c", 1, 2},
		{"a", "b", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.wf+"+"+tt.key, func(t *testing.T) {
			acts, err := s.Activities(tt.wf, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if len(acts) != tt.wantActs {
				t.Fatalf("%d activities, want %d: %s", len(acts), tt.wantActs, dump(acts))
			}
			for _, a := range acts {
				if a.Workflow != tt.wf || a.Instance != tt.key {
					t.Fatalf("activity of %s/%s leaked into %s/%s", a.Workflow, a.Instance, tt.wf, tt.key)
				}
			}
			atts, err := s.Attempts(tt.wf, tt.key, "")
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantAttemptNo == 0 {
				if len(atts) != 0 {
					t.Fatalf("unexpected attempts %s", dump(atts))
				}
				return
			}
			if len(atts) != 1 || atts[0].Number != tt.wantAttemptNo {
				t.Fatalf("attempts %s, want one numbered %d", dump(atts), tt.wantAttemptNo)
			}
		})
	}
	timers, err := s.PendingTimers()
	if err != nil {
		t.Fatal(err)
	}
	if len(timers) != 2 {
		t.Fatalf("%d timers, want 2", len(timers))
	}
	if err := s.DeleteInstance("a", "b/c"); err != nil {
		t.Fatal(err)
	}
	if acts, _ := s.Activities("a/b", "c"); len(acts) != 1 {
		t.Fatalf("deleting a + b/c removed a/b + c's activities")
	}
	if acts, _ := s.Activities("a", "b"); len(acts) != 1 {
		t.Fatalf("deleting a + b/c removed a + b's activities")
	}
}

func TestDescribeKey(t *testing.T) {
	tests := []struct {
		key  []byte
		want string
	}{
		{activityKey("a/b", "c", "d"), `activity "a/b"/"c"/"d"`},
		{attemptKey("w", "k", "a", 2, 10), `attempt "w"/"k"/"a" generation 2 number 10`},
		{budgetKey("api"), `budget "api"`},
		{instanceKey("w", "k\x00"), `instance "w"/"k\x00"`},
		{keySchema, `meta "schema"`},
		{[]byte("zzz"), `"zzz"`},
		{[]byte{tableActivity, 'x'}, `activity "ax"`},
		{nil, `""`},
	}
	for _, tt := range tests {
		if got := describeKey(tt.key); got != tt.want {
			t.Errorf("describeKey(%q) = %s, want %s", tt.key, got, tt.want)
		}
	}
}

func TestKeyEscapingRoundTrip(t *testing.T) {
	tests := [][3]string{
		{"w", "k", "a"},
		{"a/b", "c", "d"},
		{"\x00", "\x00\x01", "\x00\xff"},
		{"ü/ß", "", "x y"},
	}
	for _, tt := range tests {
		wf, key, name, err := parseActivityKey(activityKey(tt[0], tt[1], tt[2]))
		if err != nil {
			t.Fatalf("%q: %v", tt, err)
		}
		if got := [3]string{wf, key, name}; got != tt {
			t.Fatalf("parse(activityKey(%q)) = %q", tt, got)
		}
	}
	for _, bad := range [][]byte{nil, {'a', 'x'}, {'a', 'x', 0}, {'a', 'x', 0, 7}, append(activityKey("w", "k", "a"), 'z')} {
		if _, _, _, err := parseActivityKey(bad); err == nil {
			t.Fatalf("parseActivityKey(%q) accepted a malformed key", bad)
		}
	}
}

func TestTimerIndexFollowsActivity(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	commitT(t, s, record.Mutation{Activity: act("w", "k", "a", true)}, record.Mutation{Activity: act("w", "k", "b", true)})
	// a's retry happened: the timer is gone.
	commitT(t, s, record.Mutation{Activity: act("w", "k", "a", false)})
	timers, err := s.PendingTimers()
	if err != nil {
		t.Fatal(err)
	}
	if len(timers) != 1 || timers[0].Name != "b" {
		t.Fatalf("timers %s, want only b", dump(timers))
	}
}

func TestDeleteInstance(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store)
		want int // activities left in w/k1
	}{
		{"method", func(t *testing.T, s *Store) {
			if err := s.DeleteInstance("w", "k1"); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"mutation then rewrite in one commit", func(t *testing.T, s *Store) {
			commitT(t, s, record.Mutation{DeleteInstance: &record.InstanceRef{Workflow: "w", Key: "k1"}},
				record.Mutation{Instance: inst("w", "k1")}, record.Mutation{Activity: act("w", "k1", "fresh", false)})
		}, 1},
		{"write then delete in one commit", func(t *testing.T, s *Store) {
			commitT(t, s, record.Mutation{Activity: act("w", "k1", "late", true)},
				record.Mutation{DeleteInstance: &record.InstanceRef{Workflow: "w", Key: "k1"}})
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openT(t, t.TempDir())
			defer closeT(t, s)
			for _, k := range []string{"k1", "k10", "k"} {
				commitT(t, s, record.Mutation{Instance: inst("w", k)}, record.Mutation{Activity: act("w", k, "a", true)},
					record.Mutation{Attempt: att("w", k, "a", 1, 1)})
			}
			tt.run(t, s)
			acts, err := s.Activities("w", "k1")
			if err != nil {
				t.Fatal(err)
			}
			if len(acts) != tt.want {
				t.Fatalf("%d activities left, want %d", len(acts), tt.want)
			}
			if atts, _ := s.Attempts("w", "k1", ""); len(atts) != 0 {
				t.Fatalf("attempts survived: %s", dump(atts))
			}
			timers, _ := s.PendingTimers()
			for _, tm := range timers {
				if tm.Instance == "k1" {
					t.Fatalf("timer survived: %s", dump(tm))
				}
			}
			if len(timers) != 2 {
				t.Fatalf("%d timers, want those of k and k10", len(timers))
			}
			inss, _ := s.Instances()
			wantInst := 2
			if tt.want > 0 {
				wantInst = 3
			}
			if len(inss) != wantInst {
				t.Fatalf("instances %s, want %d", dump(inss), wantInst)
			}
			for _, k := range []string{"k", "k10"} {
				if acts, _ := s.Activities("w", k); len(acts) != 1 {
					t.Fatalf("neighbour %s lost its activity", k)
				}
			}
		})
	}
}

func TestCommitRejectsInvalid(t *testing.T) {
	tests := []struct {
		name string
		muts []record.Mutation
		want string
	}{
		{"no field", []record.Mutation{{}}, "0 fields set"},
		{"two fields", []record.Mutation{{Instance: inst("w", "k"), Budget: &record.Budget{Name: "b"}}}, "2 fields set"},
		{"bad record second", []record.Mutation{{Instance: inst("w", "k")}, {Attempt: &record.Attempt{Workflow: "w", Instance: "k", Activity: "a", Number: -1, Outcome: record.OutcomeFailed}}}, "mutation 1"},
		{"delete without key", []record.Mutation{{DeleteInstance: &record.InstanceRef{Workflow: "w"}}}, "empty workflow or key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openT(t, t.TempDir())
			defer closeT(t, s)
			err := s.Commit(tt.muts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Commit error %v, want %q", err, tt.want)
			}
			if inss, _ := s.Instances(); len(inss) != 0 {
				t.Fatalf("a rejected commit wrote %s", dump(inss))
			}
		})
	}
}

func TestLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg", ".wf")
	s := openT(t, dir)
	gi, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || string(gi) != "*\n" {
		t.Fatalf(".gitignore = %q, %v", gi, err)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "wf.lock"))
	if err != nil {
		t.Fatal(err)
	}
	pid, since, cmd := parseLock(lock)
	if pid != os.Getpid() || cmd != "wf test" || time.Since(since) > time.Minute {
		t.Fatalf("lock file %q parsed as pid %d since %v command %q", lock, pid, since, cmd)
	}
	for _, name := range []string{"db/MANIFEST", "wf.log"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if s.Dir() != dir {
		t.Fatalf("Dir() = %q", s.Dir())
	}
	closeT(t, s)
	if lock, _ := os.ReadFile(filepath.Join(dir, "wf.lock")); len(lock) != 0 {
		t.Fatalf("lock file still names a holder after Close: %q", lock)
	}
}

func TestClosedStore(t *testing.T) {
	s := openT(t, t.TempDir())
	closeT(t, s)
	closeT(t, s) // twice is fine
	calls := map[string]func() error{
		"Commit":          func() error { return s.Commit([]record.Mutation{{Instance: inst("w", "k")}}) },
		"Instances":       func() error { _, err := s.Instances(); return err },
		"Instance":        func() error { _, err := s.Instance("w", "k"); return err },
		"Activities":      func() error { _, err := s.Activities("w", "k"); return err },
		"Attempts":        func() error { _, err := s.Attempts("w", "k", ""); return err },
		"Budgets":         func() error { _, err := s.Budgets(); return err },
		"PendingTimers":   func() error { _, err := s.PendingTimers(); return err },
		"DeleteInstance:": func() error { return s.DeleteInstance("w", "k") },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	commitT(t, s, record.Mutation{Instance: inst("w", "k")})
	closeT(t, s)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, ro)
	if err := ro.Commit([]record.Mutation{{Instance: inst("w", "k2")}}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Commit on read-only store: %v", err)
	}
	if got, err := ro.Instance("w", "k"); err != nil || got == nil {
		t.Fatalf("read-only read: %v %v", got, err)
	}
}

func TestConcurrentCommit64(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	b0, r0 := s.batches.Load(), s.batchedReqs.Load() // Open's own commit
	const workers, each = 64, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for n := 1; n <= each; n++ {
				muts := []record.Mutation{{Attempt: att("w", "k", fmt.Sprintf("act%02d", w), 1, n)}}
				if n == each {
					muts = append(muts, record.Mutation{Activity: act("w", "k", fmt.Sprintf("act%02d", w), w%2 == 0)})
				}
				if err := s.Commit(muts); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Group commit merged calls: far fewer transactions than Commit calls.
	if b, r := s.batches.Load()-b0, s.batchedReqs.Load()-r0; r != workers*each || b >= r {
		t.Fatalf("%d batches carried %d commits, want %d commits in fewer batches", b, r, workers*each)
	}
	closeT(t, s)

	s = openT(t, dir)
	defer closeT(t, s)
	atts, err := s.Attempts("w", "k", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != workers*each {
		t.Fatalf("%d attempts after reopen, want %d", len(atts), workers*each)
	}
	acts, _ := s.Activities("w", "k")
	timers, _ := s.PendingTimers()
	if len(acts) != workers || len(timers) != workers/2 {
		t.Fatalf("%d activities and %d timers, want %d and %d", len(acts), len(timers), workers, workers/2)
	}
}

// TestSplitTooBig drives both split paths: a merged batch split at caller
// boundaries, and one caller's mutations too big for any transaction.
func TestSplitTooBig(t *testing.T) {
	big := strings.Repeat("x", 4000)
	mk := func(prefix string, n int) []record.Mutation {
		var muts []record.Mutation
		for i := range n {
			a := att("w", "k", prefix, 1, i+1)
			a.Error.Message = big
			muts = append(muts, record.Mutation{Attempt: a})
		}
		return muts
	}
	t.Run("one caller", func(t *testing.T) {
		s := openT(t, t.TempDir())
		defer closeT(t, s)
		// About 4 MB: beyond the ~2.4 MB a transaction holds with a 16 MB memtable.
		commitT(t, s, mk("a", 1000)...)
		if atts, err := s.Attempts("w", "k", "a"); err != nil || len(atts) != 1000 {
			t.Fatalf("%d attempts, %v", len(atts), err)
		}
	})
	t.Run("merged callers", func(t *testing.T) {
		s := openT(t, t.TempDir())
		defer closeT(t, s)
		var groups [][]op
		for g := range 5 {
			ops, err := encodeMutations(mk(fmt.Sprint("g", g), 200))
			if err != nil {
				t.Fatal(err)
			}
			groups = append(groups, ops)
		}
		groups = append(groups, []op{{kind: opDeletePrefix, key: attemptPrefix("w", "k", "g0")}})
		if err := s.write(groups); err != nil {
			t.Fatal(err)
		}
		atts, err := s.Attempts("w", "k", "")
		if err != nil || len(atts) != 800 {
			t.Fatalf("%d attempts, want 800 (g0 deleted by the last group), %v", len(atts), err)
		}
	})
}

func TestDecodeErrorNamesKey(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	commitT(t, s, record.Mutation{Activity: act("w", "k", "good", true)})
	poke := func(k, v []byte) {
		if err := s.w.waitApplied(); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
			t.Fatal(err)
		}
	}
	poke(activityKey("w", "k", "bad"), []byte(`{"workflow":"w"`))
	poke(timerKey("w", "k", "bad"), nil)
	poke(budgetKey("b"), []byte(`{"name":"other","stamps":[]}`))
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"activities", func() error { _, err := s.Activities("w", "k"); return err }, `record activity "w"/"k"/"bad": decode activity`},
		{"timers", func() error { _, err := s.PendingTimers(); return err }, `record activity "w"/"k"/"bad": decode activity`},
		{"budget stored under another name", func() error { _, err := s.Budgets(); return err }, `budget record is for "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestNoGoroutinesAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	for range 2 {
		s := openT(t, dir)
		commitT(t, s, record.Mutation{Activity: act("w", "k", "a", true)})
		if _, err := s.PendingTimers(); err != nil {
			t.Fatal(err)
		}
		closeT(t, s)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before Open, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
