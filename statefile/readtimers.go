package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/wf-engine/wf/statefile/record"
)

// PendingTimers returns every activity that has a timer, across all
// instances, in key order (workflow, instance key, activity). The executor
// calls it at start-up to re-arm durable timers.
func (s *Store) PendingTimers() ([]*record.Activity, error) {
	return s.readActivities("read pending timers", func(snap *snapshot, add func(c *cursor, key []byte) error) error {
		// A merge join of the timer index with the activity table: both are
		// ordered by the same (workflow, key, activity) suffix, so one pass
		// over each replaces a point lookup per timer. No prefetch: values
		// live in the LSM, and prefetching would copy each one twice.
		keys, stop := readKeys(snap, []byte{tableTimer})
		defer stop()
		ac := snap.cursor([]byte{tableActivity})
		defer ac.close()
		ac.rewind()
		target := []byte{tableActivity}
		for kb := range keys {
			if kb.err != nil {
				return kb.err
			}
			for i := range kb.len() {
				tk := kb.key(i)
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
				if err := add(ac, target); err != nil {
					return err
				}
			}
			kb.done()
		}
		return nil
	}, checkTimer)
}

// keyBatch is a run of keys read by readKeys, back to back in one buffer;
// err ends the run.
type keyBatch struct {
	buf  []byte
	ends []int
	err  error
	free chan<- *keyBatch
}

func (kb *keyBatch) len() int { return len(kb.ends) }

func (kb *keyBatch) key(i int) []byte {
	start := 0
	if i > 0 {
		start = kb.ends[i-1]
	}
	return kb.buf[start:kb.ends[i]:kb.ends[i]]
}

// done hands the batch back for readKeys to fill again.
func (kb *keyBatch) done() {
	select {
	case kb.free <- kb:
	default:
	}
}

// keyBatchLen is how many keys a keyBatch holds.
const keyBatchLen = 1024

// readKeys reads the keys under prefix on a goroutine of its own and
// sends them in order, a batch at a time: the scan of the timer index and
// the scan of the activities it is joined with then run on two CPUs (one
// scan of both was what a reopen with many timers waited for, and the
// decoders waited for it). stop ends the reading (the caller may return
// before the last key) and waits for it, cursor closed; the caller must
// call it before the snapshot goes. A panic of the database while reading
// (corrupt files) is an error in the last batch.
func readKeys(snap *snapshot, prefix []byte) (keys <-chan *keyBatch, stop func()) {
	out := make(chan *keyBatch, 4)
	free := make(chan *keyBatch, 4)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(out)
		kb := &keyBatch{free: free}
		send := func() bool {
			select {
			case out <- kb:
			case <-quit:
				return false
			}
			select {
			case kb = <-free:
				kb.buf, kb.ends = kb.buf[:0], kb.ends[:0]
			default:
				kb = &keyBatch{buf: make([]byte, 0, cap(kb.buf)), ends: make([]int, 0, keyBatchLen), free: free}
			}
			return true
		}
		defer func() {
			if r := recover(); r != nil {
				kb.err = fmt.Errorf("the database panicked (corrupt files?): %v", r)
				send()
			}
		}()
		c := snap.cursor(prefix)
		defer c.close()
		for c.rewind(); c.valid(); c.next() {
			kb.buf = append(kb.buf, c.key()...)
			kb.ends = append(kb.ends, len(kb.buf))
			if len(kb.ends) == keyBatchLen && !send() {
				return
			}
		}
		if len(kb.ends) > 0 {
			send()
		}
	})
	var once sync.Once
	return out, func() {
		once.Do(func() { close(quit) })
		wg.Wait()
	}
}

// checkTimer checks that an activity found through the timer index is the
// one its key names and does have a timer.
func checkTimer(k []byte, a *record.Activity, kb []byte) ([]byte, error) {
	if a.Timer == nil {
		return kb, errors.New("timer index entry but the activity has no timer")
	}
	kb = appendActivityKey(kb[:0], a.Workflow, a.Instance, a.Name)
	if !bytes.Equal(kb, k) {
		return kb, mismatch("activity", a.Workflow+"/"+a.Instance+"/"+a.Name, describeKey(k))
	}
	return kb, nil
}
