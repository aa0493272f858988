package statefile

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

type opKind uint8

const (
	opSet opKind = iota
	opDelete
	opDeletePrefix
	// opRename moves an activity's records (rename.go).
	opRename
)

// op is one encoded change; mutations are encoded before they queue so a
// caller's invalid record fails only that caller.
type op struct {
	kind   opKind
	key    []byte
	val    []byte
	rename *record.ActivityRename
}

// commitReq is one Commit call waiting in the group-commit queue.
type commitReq struct {
	ops []op
	// sync: the caller returns only once the record is on disk (a
	// RecordSpawn only needs it written to the file).
	sync bool
	err  error
	// wake receives false when the request has been written (err is set)
	// or true when the request must lead the next batch.
	wake chan bool
}

// Commit writes muts atomically and returns once they are durable: in a
// log record that has been fdatasynced, and applied to the database, so
// that every later read sees them.
//
// Concurrent calls are merged (group commit): the first caller becomes the
// leader and writes every request queued so far as one log record with
// one write and one fdatasync, then applies it to Badger in one
// transaction (several when Badger says it is too big); callers arriving
// meanwhile queue up, and when the leader is done it wakes them with the
// shared result and hands leadership to the first of the next queue.
// Mutations apply in order, across callers too, so a DeleteInstance
// followed by new records for that instance leaves the new records.
//
// An error after the record may have reached the log (a failed sync, a
// failed apply, a full disk) leaves the outcome unknown, as in any
// database: the next Open may find the record and apply it. The store
// then refuses every further write with the same error.
func (s *Store) Commit(muts []record.Mutation) error {
	if s.w == nil {
		return fmt.Errorf("commit state: %w", ErrReadOnly)
	}
	if len(muts) == 0 {
		return nil
	}
	ops, err := encodeMutations(muts)
	if err != nil {
		return fmt.Errorf("commit state: %w", err)
	}
	return s.commitOps(ops, true)
}

func (s *Store) commitOps(ops []op, sync bool) error {
	// A request and its channel are reused: nothing refers to them once
	// the call returns (the leader's last touch is the wake-up send, and
	// the applier holds the ops, not the request), and they were two of
	// the allocations of every Commit.
	req, _ := s.reqs.Get().(*commitReq)
	if req == nil {
		req = &commitReq{wake: make(chan bool, 1)}
	}
	req.ops, req.sync, req.err = ops, sync, nil
	err := s.commitReq(req)
	req.ops = nil
	s.reqs.Put(req)
	return err
}

// commitReq queues req and returns once it is written (as the leader of
// its batch, or woken by it).
func (s *Store) commitReq(req *commitReq) error {
	s.mu.Lock()
	s.pending = append(s.pending, req)
	if s.lingerDone != nil && len(s.pending) >= s.lingerTarget {
		close(s.lingerDone)
		s.lingerDone = nil
	}
	if s.writing {
		s.mu.Unlock()
		if lead := <-req.wake; !lead {
			return req.err
		}
		s.mu.Lock()
		s.linger()
	} else if s.lastBatch > 1 {
		// The previous batch was shared, so its callers are probably
		// about to commit again: wait for them too.
		s.writing = true
		s.linger()
	}
	// Leader: take everything queued (req among it).
	s.writing = true
	batch := s.pending
	// Room for a crowd like this one: appending from nil grew the queue
	// six or seven times per batch.
	s.pending = make([]*commitReq, 0, len(batch))
	s.lastBatch = len(batch)
	s.mu.Unlock()

	s.batches.Add(1)
	s.batchedReqs.Add(int64(len(batch)))
	err := s.writeBatch(batch)

	s.mu.Lock()
	// Callers that queued while this batch was written are the rest of
	// the crowd: the next batch should wait for them and this batch's.
	s.lastQueued = len(s.pending)
	if len(s.pending) > 0 {
		// Hand over rather than loop: the leader's own caller should not
		// pay for other callers' later batches. First, so that the next
		// leader is runnable before the crowd it waits for.
		s.pending[0].wake <- true
	} else {
		s.writing = false
	}
	s.mu.Unlock()
	for _, r := range batch {
		r.err = err
		if r != req {
			r.wake <- false
		}
	}
	return req.err
}

// linger lets callers that the previous batch just woke join this batch
// before it is written. A fsync costs about a millisecond and the woken
// callers typically commit again within microseconds, so waiting for as
// many callers as the previous batch carried plus those that queued while
// it was written (at most maxLinger, asleep meanwhile) gathers the whole
// crowd into one batch instead of batches alternating between two parts
// of it. It runs only under contention (leadership handed over, or the
// previous batch was shared), so a lone caller never waits. Called and
// returns with s.mu held.
func (s *Store) linger() {
	const maxLinger = 250 * time.Microsecond
	target := s.lastBatch + s.lastQueued
	if len(s.pending) >= target {
		return
	}
	ch := make(chan struct{})
	s.lingerDone, s.lingerTarget = ch, target
	s.mu.Unlock()
	t := time.NewTimer(maxLinger)
	select {
	case <-ch:
	case <-t.C:
	}
	t.Stop()
	s.mu.Lock()
	s.lingerDone = nil
}

// writeBatch makes one log record of the batch and appends it (syncing
// unless every request is a RecordSpawn): once it returns nil the batch is
// durable and acknowledged. Applying it to Badger is the applier's job
// (apply.go), in sequence order, while the next leader writes the next
// record; reads wait for it, so they still see every acknowledged commit.
func (s *Store) writeBatch(batch []*commitReq) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return fmt.Errorf("commit state: %w", ErrClosed)
	}
	w := s.w
	if err := w.failure(); err != nil {
		return err
	}
	groups := make([][]op, 0, len(batch)+1)
	sync := false
	n := 0
	for _, r := range batch {
		groups = append(groups, r.ops)
		n += opsSize(r.ops)
		sync = sync || r.sync
	}
	if err := checkSpace(s.dir, filepath.Join(s.dir, dbName), w.lsmBytes.Load(), n); err != nil {
		w.fail(err)
		return err
	}
	seq := w.lastSeq + 1
	if !w.wal.fits(n) {
		if err := s.rotate(seq, n); err != nil {
			return s.writeFailed(err)
		}
	}
	t0 := time.Now()
	// The ops are encoded straight into the record (no payload copy).
	err := w.wal.write(seq, groups, n)
	if err == nil && sync {
		// The cores idle during the sync: the earlier records' apply
		// takes them now (apply.go).
		w.kickApplier()
		err = w.wal.sync()
	}
	if err != nil {
		return s.writeFailed(err)
	}
	w.logTime += time.Since(t0)
	w.lastSeq = seq
	if w.wal.wantsSpare() {
		// Only with room to spare beyond what Badger may need (space.go):
		// the next segment's blocks must never be the ones Badger's mmapped
		// files were counted on. Without it, the rotation makes the segment
		// itself and meets the full disk there.
		if free, err := freeBytes(s.dir); err == nil && free >= spaceMargin(w.lsmBytes.Load(), 0)+2*w.wal.segSize {
			w.wal.prepareSpare()
		}
	}
	if s.opts.afterLogWrite != nil {
		s.opts.afterLogWrite(seq)
	}
	s.enqueueApply(applyJob{seq: seq, groups: groups, sync: sync, bytes: n})
	return nil
}

// writeFailed makes err sticky: the store refuses further writes.
func (s *Store) writeFailed(err error) error {
	if !strings.Contains(err.Error(), s.dir) {
		err = fmt.Errorf("commit state in %s: %w", s.dir, err)
	}
	if errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), "wf apply again") {
		err = fmt.Errorf("%w; free some space and run wf apply again: nothing committed is lost", err)
	}
	if s.w != nil {
		s.w.fail(err)
	}
	return err
}

func (s *Store) write(groups [][]op) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("state database panicked: %v", r)
		}
	}()
	sets := 0
	for _, g := range groups {
		for _, o := range g {
			if o.kind == opSet {
				sets++
			}
		}
	}
	for len(groups) > 0 {
		w := &txnWriter{db: s.db, txn: s.db.NewTransaction(true), sets: sets}
		fit := 0
		for _, g := range groups {
			if err = w.apply(g); err != nil {
				break
			}
			fit++
		}
		if err == nil {
			return w.commit()
		}
		w.txn.Discard()
		if !errors.Is(err, badger.ErrTxnTooBig) {
			return err
		}
		if fit == 0 {
			w = &txnWriter{db: s.db, txn: s.db.NewTransaction(true), split: true, sets: sets}
			if err := w.apply(groups[0]); err != nil {
				w.txn.Discard()
				return err
			}
			if err := w.commit(); err != nil {
				return err
			}
			groups = groups[1:]
			continue
		}
		w = &txnWriter{db: s.db, txn: s.db.NewTransaction(true), sets: sets}
		for _, g := range groups[:fit] {
			if err := w.apply(g); err != nil {
				w.txn.Discard()
				return err
			}
		}
		if err := w.commit(); err != nil {
			return err
		}
		groups = groups[fit:]
	}
	return nil
}

// txnWriter applies ops to a transaction; in split mode a transaction that
// fills up is committed and a new one started.
type txnWriter struct {
	db    *badger.DB
	txn   *badger.Txn
	split bool
	// sets is how many entries to allocate at once, slab what is left of
	// them: txn.Set allocates one Entry per key, the largest count of
	// small allocations in an apply.
	sets int
	slab []badger.Entry
}

// entrySlab is the most entries allocated at once: 64 of 96 bytes, a
// size class of its own.
const entrySlab = 64

// entry is badger.NewEntry(key, val) from the slab. A transaction keeps
// the entries it was given until it commits or is discarded, and no entry
// is handed to two of them (a retry in split mode hands the same entry,
// refused, to the next transaction), so the slab is never reused.
func (w *txnWriter) entry(key, val []byte) *badger.Entry {
	if len(w.slab) == 0 {
		// In chunks of at most entrySlab: an apply of many records would
		// otherwise be one large allocation, zeroed at once.
		w.slab = make([]badger.Entry, min(max(w.sets, 1), entrySlab))
	}
	e := &w.slab[0]
	w.slab = w.slab[1:]
	e.Key, e.Value = key, val
	return e
}

func (w *txnWriter) do(f func(*badger.Txn) error) error {
	err := f(w.txn)
	if w.split && errors.Is(err, badger.ErrTxnTooBig) {
		if err := w.commit(); err != nil {
			return err
		}
		w.txn = w.db.NewTransaction(true)
		err = f(w.txn)
	}
	return err
}

func (w *txnWriter) commit() error {
	if err := w.txn.Commit(); err != nil {
		return fmt.Errorf("write transaction: %w", err)
	}
	return nil
}

func (w *txnWriter) apply(ops []op) error {
	for _, o := range ops {
		var err error
		switch o.kind {
		case opSet:
			e := w.entry(o.key, o.val)
			err = w.do(func(txn *badger.Txn) error { return txn.SetEntry(e) })
		case opDelete:
			err = w.do(func(txn *badger.Txn) error { return txn.Delete(o.key) })
		case opDeletePrefix:
			err = w.deletePrefix(o.key)
		case opRename:
			err = w.rename(o.rename)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// deletePrefix deletes every key under prefix as the transaction sees it,
// including keys written earlier in the same transaction.
func (w *txnWriter) deletePrefix(prefix []byte) error {
	var keys [][]byte
	it := w.txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	for it.Rewind(); it.Valid(); it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := w.do(func(txn *badger.Txn) error { return txn.Delete(k) }); err != nil {
			return err
		}
	}
	return nil
}

func encodeMutations(muts []record.Mutation) ([]op, error) {
	ops := make([]op, 0, len(muts))
	for i, m := range muts {
		var err error
		if ops, err = appendMutation(ops, m); err != nil {
			return nil, fmt.Errorf("mutation %d: %w", i, err)
		}
	}
	return ops, nil
}

func appendMutation(ops []op, m record.Mutation) ([]op, error) {
	set := 0
	for _, isSet := range []bool{m.Instance != nil, m.Activity != nil, m.Attempt != nil, m.Budget != nil, m.Spawn != nil, m.DeleteInstance != nil,
		m.DeleteActivity != nil, m.RenameActivity != nil, m.Breaker != nil} {
		if isSet {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%d fields set, want exactly one", set)
	}
	switch {
	case m.Instance != nil:
		v, err := record.Encode(m.Instance)
		if err != nil {
			return nil, err
		}
		return append(ops, op{kind: opSet, key: instanceKey(m.Instance.Workflow, m.Instance.Key), val: v}), nil
	case m.Activity != nil:
		a := m.Activity
		// Key and value in one allocation (they live and die together:
		// the log copies both, the apply hands both to Badger, which
		// copies them too).
		b := appendActivityKey(make([]byte, 0, activityKeyCap(a.Workflow, a.Instance, a.Name)+record.ActivitySize(a)), a.Workflow, a.Instance, a.Name)
		k := len(b)
		b, err := record.AppendActivity(b, a)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op{kind: opSet, key: b[:k:k], val: b[k:]})
		// The timer index is written blind (no read of the old record), so
		// an activity write costs no lookup.
		switch {
		case a.Timer != nil:
			return append(ops, op{kind: opSet, key: timerKey(a.Workflow, a.Instance, a.Name), val: []byte{}}), nil
		case m.NoTimerBefore:
			// The writer's last record of it had no timer: there is no
			// index entry to delete (a third of the Badger entries of an
			// attempt's commits, when every write deleted blind).
			return ops, nil
		}
		return append(ops, op{kind: opDelete, key: timerKey(a.Workflow, a.Instance, a.Name)}), nil
	case m.Attempt != nil:
		a := m.Attempt
		// One allocation, as for an activity.
		b := appendAttemptKey(make([]byte, 0, attemptKeyCap(a.Workflow, a.Instance, a.Activity)+record.AttemptSize(a)), a.Workflow, a.Instance, a.Activity, a.Generation, a.Number)
		k := len(b)
		b, err := record.AppendAttempt(b, a)
		if err != nil {
			return nil, err
		}
		return append(ops, op{kind: opSet, key: b[:k:k], val: b[k:]}), nil
	case m.Budget != nil:
		v, err := record.Encode(m.Budget)
		if err != nil {
			return nil, err
		}
		return append(ops, op{kind: opSet, key: budgetKey(m.Budget.Name), val: v}), nil
	case m.Spawn != nil:
		sp := m.Spawn
		v, err := record.Encode(sp)
		if err != nil {
			return nil, err
		}
		return append(ops, op{kind: opSet, key: spawnKey(sp.Workflow, sp.Instance, sp.Activity), val: v}), nil
	case m.DeleteActivity != nil:
		return appendDeleteActivity(ops, m.DeleteActivity)
	case m.RenameActivity != nil:
		r := *m.RenameActivity
		if r.Workflow == "" || r.Key == "" || r.From == "" || r.To == "" {
			return nil, fmt.Errorf("rename activity %q to %q in %q/%q: empty name", r.From, r.To, r.Workflow, r.Key)
		}
		return append(ops, op{kind: opRename, rename: &r}), nil
	case m.Breaker != nil:
		v, err := record.Encode(m.Breaker)
		if err != nil {
			return nil, err
		}
		return append(ops, op{kind: opSet, key: breakerKey(m.Breaker.Name), val: v}), nil
	default:
		return appendDeleteInstance(ops, m.DeleteInstance.Workflow, m.DeleteInstance.Key)
	}
}

func appendDeleteInstance(ops []op, workflow, key string) ([]op, error) {
	if workflow == "" || key == "" {
		return nil, fmt.Errorf("delete instance %q/%q: empty workflow or key", workflow, key)
	}
	for _, table := range []byte{tableInstance, tableActivity, tableTimer, tableAttempt, tableSpawn} {
		ops = append(ops, op{kind: opDeletePrefix, key: instancePrefix(table, workflow, key)})
	}
	return ops, nil
}

// RecordSpawn records the process group of a running exec attempt. It
// returns once the record would survive the death of this process (a
// later commit makes it durable against power loss too; after a power
// loss no process survives anyway), and it is ordered with Commit: a
// spawn recorded before a Commit is never lost while that commit is kept.
func (s *Store) RecordSpawn(sp *record.Spawn) error {
	return s.RecordSpawns([]*record.Spawn{sp})
}

// RecordSpawns is RecordSpawn for several records at once, in one log
// record: the executor writes the spawn records queued while no commit
// carried them in one go, instead of one write (and one wait for the
// commit in flight) per attempt. Records apply in order, so of two
// records of one activity the later one stays.
func (s *Store) RecordSpawns(sps []*record.Spawn) error {
	if s.w == nil {
		return fmt.Errorf("record spawn: %w", ErrReadOnly)
	}
	if len(sps) == 0 {
		return nil
	}
	muts := make([]record.Mutation, len(sps))
	for i, sp := range sps {
		muts[i] = record.Mutation{Spawn: sp}
	}
	ops, err := encodeMutations(muts)
	if err != nil {
		return fmt.Errorf("record spawn: %w", err)
	}
	return s.commitOps(ops, false)
}

// DeleteInstance removes an instance with its activities, timers,
// attempts and spawns, in one transaction.
func (s *Store) DeleteInstance(workflow, key string) error {
	return s.Commit([]record.Mutation{{DeleteInstance: &record.InstanceRef{Workflow: workflow, Key: key}}})
}
