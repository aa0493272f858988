package executor

import (
	"slices"
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
// A failed commit does not end it: the mutations that could not be saved
// are kept and committed again, ahead of the next steps' own, with the next
// batch. Records are whole values applied in order, so a later batch that
// carries the failed one's mutations first leaves the store exactly as if
// both had been committed in turn; once space is freed on a full disk, the
// results of the attempts that finished meanwhile are not lost.
type committer struct {
	commit func([]record.Mutation) error
	mu     sync.Mutex
	queue  []core.Ready
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

func newCommitter(commit func([]record.Mutation) error) *committer {
	return &committer{
		commit: commit,
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
			steps := c.queue
			c.queue = nil
			c.mu.Unlock()
			if len(steps) == 0 {
				break
			}
			ms := unsaved
			if len(steps) == 1 && len(ms) == 0 {
				// Commit reads the mutations and keeps none of them.
				ms = steps[0].Persist
			} else {
				n := len(ms)
				for _, s := range steps {
					n += len(s.Persist)
				}
				ms = slices.Grow(ms, n-len(ms))
				for _, s := range steps {
					ms = append(ms, s.Persist...)
				}
			}
			err := c.commit(ms)
			if err != nil {
				unsaved = ms
			} else {
				unsaved = nil
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
