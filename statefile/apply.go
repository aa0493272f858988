package statefile

import (
	"fmt"
	"sync"
	"time"
)

// The applier applies log records to Badger, one goroutine, in sequence
// order, behind the group-commit leader: a commit is acknowledged once its
// record is synced in the log, and the next leader writes and syncs the
// next record while this one is applied. Every read first waits until
// every acknowledged record is applied, so reads in the process still see
// every acknowledged commit. At most applyQueue records wait to be
// applied; a leader with more waits (back-pressure).
//
// A record that cannot be applied is still in the log, so nothing
// acknowledged is lost (the next Open replays it); the store refuses
// further writes and reads fail, since the database no longer shows
// everything committed.

const applyQueue = 2

type applyJob struct {
	seq    uint64
	groups [][]op
	sync   bool
	bytes  int
}

func newWriterState() *writerState {
	w := &writerState{allocated: map[string]bool{}}
	w.applyCond = sync.NewCond(&w.mu)
	return w
}

func (s *Store) startApplier() {
	w := s.w
	w.jobs = make(chan applyJob, applyQueue)
	w.kick = make(chan struct{}, 1)
	w.applierDone = make(chan struct{})
	go s.applyLoop()
}

func (s *Store) enqueueApply(j applyJob) {
	w := s.w
	w.mu.Lock()
	w.queued = j.seq
	w.mu.Unlock()
	w.jobs <- j
}

func (s *Store) applyLoop() {
	w := s.w
	defer close(w.applierDone)
	var js []applyJob
	for j := range w.jobs {
		s.awaitKick(j.seq)
		// Records that queued while the previous ones were applied go in
		// together: one Badger transaction costs two goroutine switches
		// and a commit of its own, whatever its size.
		js = append(js[:0], j)
	drain:
		for len(js) < maxApplyMerge {
			select {
			case j, ok := <-w.jobs:
				if !ok {
					break drain
				}
				js = append(js, j)
			default:
				break drain
			}
		}
		w.mu.Lock()
		broken := w.applyErr != nil
		w.mu.Unlock()
		if !broken {
			s.applyJobs(js)
		}
		w.mu.Lock()
		w.applied = js[len(js)-1].seq
		w.applyCond.Broadcast()
		w.mu.Unlock()
	}
}

// applyDelay bounds how long a record waits for a kick before it is
// applied anyway (commits stopped and nobody reads).
const applyDelay = time.Millisecond

// awaitKick waits, before the record seq is applied, until the next log
// record is being synced, a read or a rotation waits for it, the store
// closes, or applyDelay passes. Applying at once would take one of the two
// cores from the callers the batch just woke, while they encode their
// next commits and gather into the next batch, and the disk would idle
// meanwhile; during the next fdatasync the cores are idle, so the apply
// costs the commit path nothing there.
func (s *Store) awaitKick(seq uint64) {
	w := s.w
	var t *time.Timer
	for {
		w.mu.Lock()
		kicked := w.kicked >= seq || w.stopping
		w.mu.Unlock()
		if kicked {
			break
		}
		if t == nil {
			t = time.NewTimer(applyDelay)
		}
		select {
		case <-w.kick:
			continue
		case <-t.C:
		}
		break
	}
	if t != nil {
		t.Stop()
	}
}

// kickApplier lets the applier apply what is queued now.
func (w *writerState) kickApplier() {
	w.mu.Lock()
	w.kickLocked()
	w.mu.Unlock()
}

func (w *writerState) kickLocked() {
	w.kicked = w.queued
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// maxApplyMerge bounds how many records one application merges.
const maxApplyMerge = 16

func (s *Store) applyJobs(js []applyJob) {
	w := s.w
	t0 := time.Now()
	var groups [][]op
	if len(js) == 1 {
		groups = js[0].groups
	} else {
		for _, j := range js {
			groups = append(groups, j.groups...)
		}
	}
	var synced uint64
	bytes := 0
	for _, j := range js {
		if j.sync {
			synced = j.seq
		}
		bytes += j.bytes
	}
	if synced > 0 {
		// Only a synced record may be named by the database's sequence:
		// the checkpoint and the checks at open rely on the log holding
		// everything up to it.
		groups = append(groups, []op{seqOp(synced)})
	}
	err := s.write(groups)
	w.applyTime += time.Since(t0)
	if err == nil {
		w.unlisted += bytes
		if w.unlisted >= memTableSize/4 {
			err = s.refreshDB()
		}
	}
	w.mu.Lock()
	if err == nil && synced > 0 {
		w.metaSeq = synced
	}
	w.mu.Unlock()
	if err != nil {
		err = s.writeFailed(fmt.Errorf("apply log records %d to %d to the database: %w", js[0].seq, js[len(js)-1].seq, err))
		w.mu.Lock()
		w.applyErr = err
		w.mu.Unlock()
	}
}

// waitApplied waits until every record written before the call is
// applied (later ones do not hold it up), and says whether one could not
// be.
func (w *writerState) waitApplied() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := w.queued
	if w.applied < target && w.kick != nil {
		w.kickLocked()
	}
	for w.applied < target {
		w.applyCond.Wait()
	}
	return w.applyErr
}

// stopApplier lets the applier finish what is queued and stop.
func (s *Store) stopApplier() {
	w := s.w
	if w == nil || w.jobs == nil {
		return
	}
	w.mu.Lock()
	w.stopping = true
	w.kickLocked()
	w.mu.Unlock()
	close(w.jobs)
	<-w.applierDone
	w.jobs = nil
}

func (w *writerState) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = err
	}
}

func (w *writerState) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *writerState) lastMetaSeq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.metaSeq
}
