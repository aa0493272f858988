package executor

import (
	"sync"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/statefile/record"
)

// committer commits the core's steps in order, merging every step queued
// while the previous commit was in flight into one Commit (one fsync).
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
	done   chan commitDone
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
		done:   make(chan commitDone),
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
			for _, s := range steps {
				ms = append(ms, s.Persist...)
			}
			err := c.commit(ms)
			if err != nil {
				unsaved = ms
			} else {
				unsaved = nil
			}
			select {
			case c.done <- commitDone{steps: steps, err: err}:
			case <-c.quit:
				return
			}
		}
	}
}

// close stops the committer and waits for it, so that no commit is in
// flight once the run is over.
func (c *committer) close() {
	close(c.quit)
	<-c.exited
}
