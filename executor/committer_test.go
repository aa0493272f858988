package executor

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/statefile/record"
)

// mut is a mutation told apart by its activity name.
func mut(name string) record.Mutation {
	return record.Mutation{Activity: &record.Activity{Name: name}}
}

func names(ms []record.Mutation) []string {
	var out []string
	for _, m := range ms {
		if m.Spawn != nil {
			out = append(out, "spawn:"+m.Spawn.Activity)
			continue
		}
		out = append(out, m.Activity.Name)
	}
	return out
}

// scriptedCommits is a commit function whose calls block until released,
// each returning the next scripted error.
type scriptedCommits struct {
	mu      sync.Mutex
	calls   [][]string
	errs    []error
	started chan struct{}
	release chan struct{}
}

func (s *scriptedCommits) commit(ms []record.Mutation) error {
	s.mu.Lock()
	s.calls = append(s.calls, names(ms))
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	s.mu.Unlock()
	s.started <- struct{}{}
	<-s.release
	return err
}

func (s *scriptedCommits) callsSoFar() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func waitCommit(t *testing.T, s *scriptedCommits) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(10 * time.Second):
		t.Fatalf("no commit started; calls so far: %v", s.callsSoFar())
	}
}

// results hands a test the committer's finished commits one at a time,
// in order. Commits that finish before the test takes may all be queued
// by then, and one take returns them together, as it does to the loop:
// the ones after the first wait here.
type results struct {
	c     *committer
	taken []commitDone
}

func (r *results) next(t *testing.T) commitDone {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.taken) == 0 && time.Now().Before(deadline) {
		select {
		case <-r.c.done:
			r.taken = append(r.taken, r.c.take()...)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if len(r.taken) == 0 {
		t.Fatal("no result")
	}
	d := r.taken[0]
	r.taken = r.taken[1:]
	return d
}

// none fails if the committer reported more results than were taken.
func (r *results) none(t *testing.T) {
	t.Helper()
	if extra := append(r.taken, r.c.take()...); len(extra) != 0 {
		t.Fatalf("%d results more than commits: %+v", len(extra), extra)
	}
}

// TestCommitterDoesNotWaitForTheLoop: steps queued while a commit is in
// flight are merged into the next commit, which starts as soon as the one
// before returns, whether or not the loop has taken its result; the loop
// then takes the results in order. A failed commit's mutations go first
// into the next commit.
func TestCommitterDoesNotWaitForTheLoop(t *testing.T) {
	s := &scriptedCommits{
		errs:    []error{nil, errors.New("disk full")},
		started: make(chan struct{}),
		release: make(chan struct{}),
	}
	c := newCommitter(s.commit, nil)
	go c.run()
	defer c.close()
	step := func(n ...string) core.Ready {
		var r core.Ready
		for _, x := range n {
			r.Persist = append(r.Persist, mut(x))
		}
		return r
	}

	c.submit(step("a"))
	waitCommit(t, s) // commit 1: a, in flight
	c.submit(step("b"))
	c.submit(step("c1", "c2"))
	s.release <- struct{}{} // commit 1 returns; nobody takes it
	waitCommit(t, s)        // commit 2 (b, c1, c2) starts anyway
	c.submit(step("d"))
	s.release <- struct{}{} // commit 2 fails
	waitCommit(t, s)        // commit 3 carries commit 2's mutations first
	s.release <- struct{}{}

	want := [][]string{{"a"}, {"b", "c1", "c2"}, {"b", "c1", "c2", "d"}}
	if got := s.callsSoFar(); !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Fatalf("commits = %v, want %v", got, want)
	}
	r := &results{c: c}
	got := []commitDone{r.next(t), r.next(t), r.next(t)}
	r.none(t)
	steps := []int{len(got[0].steps), len(got[1].steps), len(got[2].steps)}
	errs := []bool{got[0].err != nil, got[1].err != nil, got[2].err != nil}
	if !slices.Equal(steps, []int{1, 2, 1}) || !slices.Equal(errs, []bool{false, true, false}) {
		t.Errorf("results: steps per commit %v, errors %v; want [1 2 1], [false true false]", steps, errs)
	}
}

// TestCommitterWritesSpawns: a spawn record queued while a commit is in
// flight goes into the next commit, ahead of the steps queued with it; one
// queued while the committer is idle is written alone with the record
// function (not a synced commit), and only its failure reaches the loop,
// the record then going first into the next commit.
func TestCommitterWritesSpawns(t *testing.T) {
	s := &scriptedCommits{started: make(chan struct{}), release: make(chan struct{})}
	records := make(chan []string, 4)
	recordErrs := []error{nil, errors.New("disk full")}
	c := newCommitter(s.commit, func(sps []*record.Spawn) error {
		var n []string
		for _, sp := range sps {
			n = append(n, sp.Activity)
		}
		err := recordErrs[0]
		recordErrs = recordErrs[1:]
		records <- n
		return err
	})
	go c.run()
	defer c.close()
	step := func(n string) core.Ready { return core.Ready{Persist: []record.Mutation{mut(n)}} }
	spawn := func(n string) *record.Spawn { return &record.Spawn{Activity: n} }
	waitRecord := func() []string {
		t.Helper()
		select {
		case n := <-records:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("no spawn record written")
			return nil
		}
	}
	r := &results{c: c}

	c.submit(step("a"))
	waitCommit(t, s) // commit 1: a, in flight
	c.submitSpawn(spawn("x"))
	c.submit(step("b"))
	s.release <- struct{}{}
	waitCommit(t, s) // commit 2: the record, then b
	s.release <- struct{}{}
	for i, name := range []string{"a", "b"} {
		if d := r.next(t); d.err != nil || len(d.steps) != 1 || names(d.steps[0].Persist)[0] != name {
			t.Fatalf("result %d reported as %+v, want step %s", i+1, d, name)
		}
	}

	c.submitSpawn(spawn("y")) // idle: written alone
	if n := waitRecord(); !slices.Equal(n, []string{"y"}) {
		t.Fatalf("records written alone: %v, want [y]", n)
	}
	c.submitSpawn(spawn("z")) // written alone, and fails
	if n := waitRecord(); !slices.Equal(n, []string{"z"}) {
		t.Fatalf("records written alone: %v, want [z]", n)
	}
	if d := r.next(t); d.err == nil || len(d.steps) != 0 {
		t.Fatalf("failed record reported as %+v, want an error and no steps", d)
	}
	c.submit(step("c"))
	waitCommit(t, s) // commit 3: the failed record first
	s.release <- struct{}{}
	if d := r.next(t); d.err != nil || len(d.steps) != 1 {
		t.Fatalf("commit 3 reported as %+v", d)
	}
	r.none(t)
	want := [][]string{{"a"}, {"spawn:x", "b"}, {"spawn:z", "c"}}
	if got := s.callsSoFar(); !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Fatalf("commits = %v, want %v", got, want)
	}
}
