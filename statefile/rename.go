package statefile

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

// appendDeleteActivity forgets one activity: its record, timer index,
// attempts and spawn.
func appendDeleteActivity(ops []op, r *record.ActivityRef) ([]op, error) {
	if r.Workflow == "" || r.Key == "" || r.Name == "" {
		return nil, fmt.Errorf("delete activity %q in %q/%q: empty name", r.Name, r.Workflow, r.Key)
	}
	return append(ops,
		op{kind: opDelete, key: activityKey(r.Workflow, r.Key, r.Name)},
		op{kind: opDelete, key: timerKey(r.Workflow, r.Key, r.Name)},
		op{kind: opDeletePrefix, key: attemptPrefix(r.Workflow, r.Key, r.Name)},
		op{kind: opDelete, key: spawnKey(r.Workflow, r.Key, r.Name)},
	), nil
}

// rename moves an activity's record, timer index, attempts and spawn to
// its new name within the transaction, rewriting the name inside each
// record. A record already at the new name is replaced (the caller, a
// moved block, only renames onto a free name).
func (w *txnWriter) rename(r *record.ActivityRename) error {
	if r.From == r.To {
		return nil
	}
	move := func(from, to []byte, rewrite func([]byte) ([]byte, error)) error {
		var val []byte
		err := w.do(func(txn *badger.Txn) error {
			item, err := txn.Get(from)
			if err != nil {
				return err
			}
			val, err = item.ValueCopy(nil)
			return err
		})
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rewrite != nil {
			if val, err = rewrite(val); err != nil {
				return fmt.Errorf("rename activity %s to %s: %w", r.From, r.To, err)
			}
		}
		if err := w.do(func(txn *badger.Txn) error { return txn.Set(to, val) }); err != nil {
			return err
		}
		return w.do(func(txn *badger.Txn) error { return txn.Delete(from) })
	}
	err := move(activityKey(r.Workflow, r.Key, r.From), activityKey(r.Workflow, r.Key, r.To), func(b []byte) ([]byte, error) {
		a, err := record.DecodeActivity(b)
		if err != nil {
			return nil, err
		}
		a.Name = r.To
		return record.Encode(a)
	})
	if err != nil {
		return err
	}
	if err := move(timerKey(r.Workflow, r.Key, r.From), timerKey(r.Workflow, r.Key, r.To), nil); err != nil {
		return err
	}
	err = move(spawnKey(r.Workflow, r.Key, r.From), spawnKey(r.Workflow, r.Key, r.To), func(b []byte) ([]byte, error) {
		sp, err := record.DecodeSpawn(b)
		if err != nil {
			return nil, err
		}
		sp.Activity = r.To
		return record.Encode(sp)
	})
	if err != nil {
		return err
	}
	// Attempts: collect first, the iterator must be closed before writing.
	type kv struct{ key, val []byte }
	var atts []kv
	it := w.txn.NewIterator(badger.IteratorOptions{Prefix: attemptPrefix(r.Workflow, r.Key, r.From), PrefetchValues: true})
	for it.Rewind(); it.Valid(); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			it.Close()
			return err
		}
		atts = append(atts, kv{it.Item().KeyCopy(nil), v})
	}
	it.Close()
	for _, a := range atts {
		att, err := record.DecodeAttempt(a.val)
		if err != nil {
			return fmt.Errorf("rename activity %s to %s: %w", r.From, r.To, err)
		}
		att.Activity = r.To
		val, err := record.Encode(att)
		if err != nil {
			return err
		}
		key := attemptKey(r.Workflow, r.Key, r.To, att.Generation, att.Number)
		if err := w.do(func(txn *badger.Txn) error { return txn.Set(key, val) }); err != nil {
			return err
		}
		if err := w.do(func(txn *badger.Txn) error { return txn.Delete(a.key) }); err != nil {
			return err
		}
	}
	return nil
}
