package executor

import (
	"sync"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/statefile/record"
)

// committer commits the core's steps in order, merging every step queued
// while the previous commit was in flight into one Commit (one fsync).
//
// It never waits for the loop: a finished commit is queued for the loop
// (which takes them with take, in order) and the next commit starts at
// once. When it waited for the loop to take each result, a loop busy with
// a large step (500 results at once) kept the disk idle meanwhile, and the
// attempts of the next steps waited for that as well as for their own
// commit.
//
// It also writes the spawn records of exec attempts (submitSpawn), so
// that a worker never waits for one: a record queued while a commit is in
// flight goes into the next commit, with the steps queued meanwhile (no
// write of its own), and one queued while the store is idle is written at
// once without a sync (record), as soon as a RecordSpawn of its own would
// have been. One writer keeps them in order: the record of attempt n of an
// activity is queued before its result, so it is written no later than
// that result's commit, and never after the record of attempt n+1.
//
// A failed commit does not end it: the mutations that could not be saved
// are kept and committed again, ahead of the next steps' own, with the next
// batch. Records are whole values applied in order, so a later batch that
// carries the failed one's mutations first leaves the store exactly as if
// both had been committed in turn; once space is freed on a full disk, the
// results of the attempts that finished meanwhile are not lost.
type committer struct {
	commit func([]record.Mutation) error
	// record writes spawn records when no step is queued with them.
	record func([]*record.Spawn) error
	mu     sync.Mutex
	queue  []core.Ready
	spawns []*record.Spawn
	notify chan struct{}
	quit   chan struct{}
	exited chan struct{}
	// finished holds the commits done and not yet taken by the loop, in
	// order; done says there are some.
	finished []commitDone
	done     chan struct{}
}

type commitDone struct {
	steps []core.Ready
	err   error
}

// newCommitter returns a committer that commits with commit and writes
// spawn records alone with record (nil when no spawn is ever submitted).
func newCommitter(commit func([]record.Mutation) error, record func([]*record.Spawn) error) *committer {
	return &committer{
		commit: commit,
		record: record,
		notify: make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
		done:   make(chan struct{}, 1),
	}
}

func (c *committer) submit(r core.Ready) {
	c.mu.Lock()
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	c.poke()
}

// submitSpawn queues the spawn record of an exec attempt that has just
// started.
func (c *committer) submitSpawn(sp *record.Spawn) {
	c.mu.Lock()
	c.spawns = append(c.spawns, sp)
	c.mu.Unlock()
	c.poke()
}

// poke wakes the committer's goroutine unless a wake-up is already
// pending (it takes everything queued when it runs).
func (c *committer) poke() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *committer) run() {
	defer close(c.exited)
	var unsaved []record.Mutation
	for {
		select {
		case <-c.notify:
		case <-c.quit:
			return
		}
		for {
			c.mu.Lock()
			steps, spawns := c.queue, c.spawns
			c.queue, c.spawns = nil, nil
			c.mu.Unlock()
			if len(steps) == 0 && len(spawns) == 0 {
				break
			}
			var err error
			if len(steps) == 0 && len(unsaved) == 0 {
				// Only spawn records: written, not synced, as a
				// RecordSpawn is (the store is idle: this is its
				// only writer), so the next commit does not wait
				// for a sync of them.
				if err = c.record(spawns); err != nil {
					unsaved = spawnMutations(nil, spawns)
				}
			} else {
				ms := mergeSteps(unsaved, spawns, steps)
				if err = c.commit(ms); err != nil {
					unsaved = ms
				} else {
					unsaved = nil
				}
			}
			if len(steps) == 0 && err == nil {
				continue // nothing for the loop
			}
			c.mu.Lock()
			c.finished = append(c.finished, commitDone{steps: steps, err: err})
			c.mu.Unlock()
			select {
			case c.done <- struct{}{}:
			default:
			}
			select {
			case <-c.quit:
				return
			default:
			}
		}
	}
}

// mergeSteps returns unsaved, then the spawn records, then the steps'
// mutations: one step's own when there is nothing else (Commit reads the
// mutations and keeps none of them), otherwise a new slice.
func mergeSteps(unsaved []record.Mutation, spawns []*record.Spawn, steps []core.Ready) []record.Mutation {
	if len(steps) == 1 && len(unsaved) == 0 && len(spawns) == 0 {
		return steps[0].Persist
	}
	n := len(unsaved) + len(spawns)
	for _, s := range steps {
		n += len(s.Persist)
	}
	ms := make([]record.Mutation, 0, n)
	ms = append(ms, unsaved...)
	ms = spawnMutations(ms, spawns)
	for _, s := range steps {
		ms = append(ms, s.Persist...)
	}
	return ms
}

func spawnMutations(ms []record.Mutation, spawns []*record.Spawn) []record.Mutation {
	for _, sp := range spawns {
		ms = append(ms, record.Mutation{Spawn: sp})
	}
	return ms
}

// take returns the commits finished since the last take, in order.
func (c *committer) take() []commitDone {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.finished
	c.finished = nil
	return f
}

// close stops the committer and waits for it, so that no commit is in
// flight once the run is over.
func (c *committer) close() {
	close(c.quit)
	<-c.exited
}
