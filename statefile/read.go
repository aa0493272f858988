package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"

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
	var keys, vals [][]byte
	err := s.read("read activities of "+workflow+"/"+key, func(snap *snapshot) error {
		c := snap.cursor(instancePrefix(tableActivity, workflow, key))
		defer c.close()
		for c.rewind(); c.valid(); c.next() {
			v, err := c.value()
			if err != nil {
				return err
			}
			keys = append(keys, bytes.Clone(c.key()))
			vals = append(vals, v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Resuming a large instance decodes every activity before the first
	// timer can fire: spread the decoding over every CPU.
	recs := make([]*record.Activity, len(vals))
	errs := make([]error, len(vals))
	const chunk = 2048
	var wg sync.WaitGroup
	for lo := 0; lo < len(vals); lo += chunk {
		hi := min(lo+chunk, len(vals))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				r, err := record.DecodeActivity(vals[i])
				if err == nil && (r.Workflow != workflow || r.Instance != key || string(activityKey(workflow, key, r.Name)) != string(keys[i])) {
					err = mismatch("activity", r.Workflow+"/"+r.Instance+"/"+r.Name, string(keys[i]))
				}
				recs[i], errs[i] = r, err
			}
		})
	}
	wg.Wait()
	out := make(map[string]*record.Activity, len(recs))
	for i, r := range recs {
		if errs[i] != nil {
			return nil, fmt.Errorf("read activities of %s/%s: %w", workflow, key, keyError(keys[i], errs[i]))
		}
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

// PendingTimers returns every activity that has a timer, across all
// instances, in key order (workflow, instance key, activity). The executor
// calls it at start-up to re-arm durable timers.
func (s *Store) PendingTimers() ([]*record.Activity, error) {
	// Decoding dominates start-up with many timers, so chunks of raw
	// values go to decoders on every CPU while the scan goes on.
	type chunk struct {
		keys, vals [][]byte
		out        []*record.Activity
		err        error
	}
	const chunkSize = 512
	work := make(chan *chunk, 64)
	var chunks []*chunk
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range work {
				c.out, c.err = decodeTimers(c.keys, c.vals)
			}
		})
	}
	cur := &chunk{}
	flush := func() {
		if len(cur.vals) > 0 {
			chunks = append(chunks, cur)
			work <- cur
			cur = &chunk{}
		}
	}
	err := s.read("read pending timers", func(snap *snapshot) error {
		// A merge join of the timer index with the activity table: both are
		// ordered by the same (workflow, key, activity) suffix, so one pass
		// over each replaces a point lookup per timer. No prefetch: values
		// live in the LSM, and prefetching would copy each one twice.
		tc := snap.cursor([]byte{tableTimer})
		defer tc.close()
		ac := snap.cursor([]byte{tableActivity})
		defer ac.close()
		ac.rewind()
		target := []byte{tableActivity}
		for tc.rewind(); tc.valid(); tc.next() {
			tk := tc.key()
			target = append(target[:1], tk[1:]...)
			for steps := 0; ac.valid() && bytes.Compare(ac.key(), target) < 0; steps++ {
				// Step over a few activities without timers; jump past
				// long runs of them.
				if steps < 8 {
					ac.next()
				} else {
					ac.seek(target)
				}
			}
			if !ac.valid() || !bytes.Equal(ac.key(), target) {
				return keyError(tk, errors.New("timer index entry without its activity"))
			}
			v, err := ac.value()
			if err != nil {
				return err
			}
			cur.keys = append(cur.keys, bytes.Clone(target))
			cur.vals = append(cur.vals, v)
			if len(cur.vals) == chunkSize {
				flush()
			}
		}
		flush()
		return nil
	})
	close(work)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range chunks {
		if c.err != nil {
			return nil, fmt.Errorf("read pending timers: %w", c.err)
		}
		n += len(c.out)
	}
	out := make([]*record.Activity, 0, n)
	for _, c := range chunks {
		out = append(out, c.out...)
	}
	return out, nil
}

// decodeTimers decodes activities found through the timer index and checks
// that each is the one its key names and does have a timer.
func decodeTimers(keys, vals [][]byte) ([]*record.Activity, error) {
	out := make([]*record.Activity, len(vals))
	for i, v := range vals {
		a, err := record.DecodeActivity(v)
		if err != nil {
			return nil, keyError(keys[i], err)
		}
		if a.Timer == nil {
			return nil, keyError(keys[i], errors.New("timer index entry but the activity has no timer"))
		}
		if string(activityKey(a.Workflow, a.Instance, a.Name)) != string(keys[i]) {
			return nil, keyError(keys[i], mismatch("activity", a.Workflow+"/"+a.Instance+"/"+a.Name, describeKey(keys[i])))
		}
		out[i] = a
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
