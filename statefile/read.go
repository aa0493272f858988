package statefile

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/wf-engine/wf/statefile/record"
)

// read runs fn on a snapshot unless the store is closed, converting
// Badger panics (corrupt files) into errors.
func (s *Store) read(what string, fn func(snap *snapshot) error) (err error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return fmt.Errorf("%s: %w", what, ErrClosed)
	}
	if s.w != nil {
		// See every acknowledged commit (apply.go).
		if err := s.w.waitApplied(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	snap := s.snapshot()
	defer snap.discard()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the database panicked (corrupt files?): %v", r)
		}
		if err != nil {
			err = fmt.Errorf("state in %s: %s: %w", s.dir, what, err)
		}
	}()
	return fn(snap)
}

// scan decodes every value under prefix, in key order.
func scan[T any](snap *snapshot, prefix []byte, decode func([]byte) (*T, error), each func(key []byte, r *T) error) error {
	c := snap.cursor(prefix)
	defer c.close()
	for c.rewind(); c.valid(); c.next() {
		v, err := c.value()
		if err != nil {
			return err
		}
		r, err := decode(v)
		if err != nil {
			return keyError(c.key(), err)
		}
		if err := each(c.key(), r); err != nil {
			return keyError(c.key(), err)
		}
	}
	return nil
}

func keyError(key []byte, err error) error {
	return fmt.Errorf("record %s: %w", describeKey(key), err)
}

func mismatch(kind, got, want string) error {
	return fmt.Errorf("%s record is for %q but stored under %q", kind, got, want)
}

// Instances returns every instance, sorted by address (workflow/key).
func (s *Store) Instances() ([]*record.Instance, error) {
	var out []*record.Instance
	err := s.read("list instances", func(snap *snapshot) error {
		return scan(snap, []byte{tableInstance}, record.DecodeInstance, func(k []byte, r *record.Instance) error {
			if want := instanceKey(r.Workflow, r.Key); string(want) != string(k) {
				return mismatch("instance", r.Address(), string(k))
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address() < out[j].Address() })
	return out, nil
}

// Instance returns one instance, or nil and no error when it is absent.
func (s *Store) Instance(workflow, key string) (*record.Instance, error) {
	var out *record.Instance
	err := s.read("read instance "+workflow+"/"+key, func(snap *snapshot) error {
		k := instanceKey(workflow, key)
		v, ok, err := snap.get(k)
		if err != nil || !ok {
			return err
		}
		r, err := record.DecodeInstance(v)
		if err != nil {
			return keyError(k, err)
		}
		out = r
		return nil
	})
	return out, err
}

// Activities returns the activities of an instance by name; the map is
// empty (not nil) when there are none.
func (s *Store) Activities(workflow, key string) (map[string]*record.Activity, error) {
	what := "read activities of " + workflow + "/" + key
	recs, err := s.readActivities(what, func(snap *snapshot, add func(c *cursor, key []byte) error) error {
		c := snap.cursor(instancePrefix(tableActivity, workflow, key))
		defer c.close()
		for c.rewind(); c.valid(); c.next() {
			if err := add(c, c.key()); err != nil {
				return err
			}
		}
		return nil
	}, func(k []byte, r *record.Activity, kb []byte) ([]byte, error) {
		kb = appendActivityKey(kb[:0], r.Workflow, r.Instance, r.Name)
		if r.Workflow != workflow || r.Instance != key || !bytes.Equal(kb, k) {
			return kb, mismatch("activity", r.Workflow+"/"+r.Instance+"/"+r.Name, string(k))
		}
		return kb, nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*record.Activity, len(recs))
	for _, r := range recs {
		out[r.Name] = r
	}
	return out, nil
}

// Attempts returns the attempt log of one activity, every generation,
// ordered by generation then number. With activity "" it returns the log
// of every activity of the instance, ordered by activity, generation and
// number.
func (s *Store) Attempts(workflow, key, activity string) ([]*record.Attempt, error) {
	var out []*record.Attempt
	err := s.read("read attempts of "+workflow+"/"+key, func(snap *snapshot) error {
		return scan(snap, attemptPrefix(workflow, key, activity), record.DecodeAttempt, func(k []byte, r *record.Attempt) error {
			if string(attemptKey(r.Workflow, r.Instance, r.Activity, r.Generation, r.Number)) != string(k) {
				return mismatch("attempt", fmt.Sprintf("%s/%s/%s #%d.%d", r.Workflow, r.Instance, r.Activity, r.Generation, r.Number), string(k))
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Budgets returns every retry budget's window by name.
func (s *Store) Budgets() (map[string]*record.Budget, error) {
	out := map[string]*record.Budget{}
	err := s.read("read budgets", func(snap *snapshot) error {
		return scan(snap, []byte{tableBudget}, record.DecodeBudget, func(k []byte, r *record.Budget) error {
			if string(budgetKey(r.Name)) != string(k) {
				return mismatch("budget", r.Name, string(k))
			}
			out[r.Name] = r
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Spawns returns the recorded process groups of an instance's exec
// attempts by activity name (the last attempt of each that started a
// process); empty, not nil, when there are none.
func (s *Store) Spawns(workflow, key string) (map[string]*record.Spawn, error) {
	out := map[string]*record.Spawn{}
	err := s.read("read spawns of "+workflow+"/"+key, func(snap *snapshot) error {
		return scan(snap, instancePrefix(tableSpawn, workflow, key), record.DecodeSpawn, func(k []byte, r *record.Spawn) error {
			if string(spawnKey(r.Workflow, r.Instance, r.Activity)) != string(k) {
				return mismatch("spawn", r.Workflow+"/"+r.Instance+"/"+r.Activity, string(k))
			}
			out[r.Activity] = r
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
