package main

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/wf-engine/wf/executor/livestate"
	"github.com/wf-engine/wf/statefile"
)

// stateReader is the state as the reading commands see it: the store
// opened read-only, or, while a wf apply holds it, that apply answering
// over its event socket (SPEC §8). Both give the same records.
//
// A new reading command (wf output, SPEC §10) works during an apply by
// opening the state with openStateReader (or openReader) instead of
// statefile.Open and reading through this interface; a read it needs that
// livestate.Source lacks is added there, with its op in livestate.Serve.
type stateReader interface {
	livestate.Source
	Close() error
}

// applyGrace is how long a reader keeps trying when a wf apply holds the
// state but does not answer on its socket: it is starting (before its
// socket is up) or ending (its socket closed, its lock not yet released).
const applyGrace = 3 * time.Second

// openReader opens the state in stateDir for reading. When another wf
// holds it, the reads go to that wf over the state's event socket if it is
// an apply; otherwise (wf state rm, a writer that serves nothing) the
// lock's error is returned once lockTimeout has passed.
func (c *CLI) openReader(ctx context.Context, stateDir, command string, lockTimeout time.Duration) (stateReader, error) {
	start := time.Now()
	for {
		store, err := statefile.Open(stateDir, statefile.Options{Command: command, ReadOnly: true})
		var locked *statefile.LockedError
		if !errors.As(err, &locked) {
			if err != nil {
				return nil, err // names the state directory and what is wrong
			}
			return store, nil
		}
		live, derr := livestate.Dial(ctx, filepath.Join(stateDir, socketName))
		if derr == nil {
			return live, nil
		}
		waited := time.Since(start)
		// An apply (or a holder that has not said who it is yet) between
		// taking the lock and serving, or between closing the socket and
		// releasing the lock, answers in a moment.
		mayServe := locked.Command == "" || locked.Command == "wf apply"
		if waited >= lockTimeout && (!mayServe || waited >= applyGrace) {
			return nil, err // names the holder of the lock
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
