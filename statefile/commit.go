package statefile

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

type opKind uint8

const (
	opSet opKind = iota
	opDelete
	opDeletePrefix
)

// op is one encoded change; mutations are encoded before they queue so a
// caller's invalid record fails only that caller.
type op struct {
	kind opKind
	key  []byte
	val  []byte
}

// commitReq is one Commit call waiting in the group-commit queue.
type commitReq struct {
	ops []op
	err error
	// wake receives false when the request has been written (err is set)
	// or true when the request must lead the next batch.
	wake chan bool
}

// Commit writes muts atomically (one synced Badger transaction) and
// returns once they are on disk.
//
// Concurrent calls are merged (group commit): the first caller becomes the
// leader and writes every request queued so far in one transaction; callers
// arriving meanwhile queue up, and when the leader is done it wakes them
// with the shared result and hands leadership to the first of the next
// queue. A merged batch is split into several transactions only when
// Badger reports it too big, and then every part is synced before anyone
// is acknowledged. Mutations apply in order, across callers too, so a
// DeleteInstance followed by new records for that instance leaves the new
// records.
func (s *Store) Commit(muts []record.Mutation) error {
	if s.opts.ReadOnly {
		return fmt.Errorf("commit state: %w", ErrReadOnly)
	}
	if len(muts) == 0 {
		return nil
	}
	ops, err := encodeMutations(muts)
	if err != nil {
		return fmt.Errorf("commit state: %w", err)
	}
	req := &commitReq{ops: ops, wake: make(chan bool, 1)}
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
	s.pending = nil
	s.lastBatch = len(batch)
	s.mu.Unlock()

	s.batches.Add(1)
	s.batchedReqs.Add(int64(len(batch)))
	err = s.writeBatch(batch)
	for _, r := range batch {
		r.err = err
		if r != req {
			r.wake <- false
		}
	}

	s.mu.Lock()
	if len(s.pending) > 0 {
		// Hand over rather than loop: the leader's own caller should not
		// pay for other callers' later batches.
		s.pending[0].wake <- true
	} else {
		s.writing = false
	}
	s.mu.Unlock()
	return req.err
}

// linger lets callers that the previous batch just woke join this batch
// before it is written. A fsync costs about a millisecond and the woken
// callers typically commit again within microseconds, so waiting for as
// many callers as the previous batch carried (at most maxLinger, asleep
// meanwhile) roughly doubles the records per fsync compared with
// batches alternating between two half-sized groups. It runs only under
// contention (leadership handed over, or the previous batch was shared), so
// a lone caller never waits. Called and returns with s.mu held.
func (s *Store) linger() {
	const maxLinger = 250 * time.Microsecond
	if len(s.pending) >= s.lastBatch {
		return
	}
	ch := make(chan struct{})
	s.lingerDone, s.lingerTarget = ch, s.lastBatch
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

func (s *Store) writeBatch(batch []*commitReq) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return fmt.Errorf("commit state: %w", ErrClosed)
	}
	groups := make([][]op, len(batch))
	for i, r := range batch {
		groups[i] = r.ops
	}
	if err := s.write(groups); err != nil {
		return fmt.Errorf("commit state: %w", err)
	}
	return nil
}

// write applies groups of ops, each group being one caller's mutations.
// It prefers one transaction; when Badger says that is too big it commits
// the largest leading run of groups that fits and continues with the rest,
// and a single group too big on its own is spread over several
// transactions.
func (s *Store) write(groups [][]op) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("state database panicked: %v", r)
		}
	}()
	for len(groups) > 0 {
		w := &txnWriter{db: s.db, txn: s.db.NewTransaction(true)}
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
			w = &txnWriter{db: s.db, txn: s.db.NewTransaction(true), split: true}
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
		w = &txnWriter{db: s.db, txn: s.db.NewTransaction(true)}
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
			err = w.do(func(txn *badger.Txn) error { return txn.Set(o.key, o.val) })
		case opDelete:
			err = w.do(func(txn *badger.Txn) error { return txn.Delete(o.key) })
		case opDeletePrefix:
			err = w.deletePrefix(o.key)
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
	for _, isSet := range []bool{m.Instance != nil, m.Activity != nil, m.Attempt != nil, m.Budget != nil, m.Spawn != nil, m.DeleteInstance != nil, m.Breaker != nil} {
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
		v, err := record.Encode(a)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op{kind: opSet, key: activityKey(a.Workflow, a.Instance, a.Name), val: v})
		// The timer index is written blind (no read of the old record), so
		// an activity write costs no lookup.
		tk := timerKey(a.Workflow, a.Instance, a.Name)
		if a.Timer != nil {
			return append(ops, op{kind: opSet, key: tk, val: []byte{}}), nil
		}
		return append(ops, op{kind: opDelete, key: tk}), nil
	case m.Attempt != nil:
		a := m.Attempt
		v, err := record.Encode(a)
		if err != nil {
			return nil, err
		}
		return append(ops, op{kind: opSet, key: attemptKey(a.Workflow, a.Instance, a.Activity, a.Generation, a.Number), val: v}), nil
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
	return s.Commit([]record.Mutation{{Spawn: sp}})
}

// DeleteInstance removes an instance with its activities, timers,
// attempts and spawns, in one transaction.
func (s *Store) DeleteInstance(workflow, key string) error {
	return s.Commit([]record.Mutation{{DeleteInstance: &record.InstanceRef{Workflow: workflow, Key: key}}})
}
