package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

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

// rawChunk holds the raw keys and values of a run of records back to back,
// so that reading 100,000 activities makes a few hundred allocations
// instead of 200,000 (each a copy the decoder copies again). The values of
// up to sharedMax bytes are written into small, which becomes one string
// without a copy: the decoded records' strings are cut from it. Larger
// values (large for their outputs, which are copied anyway) go to big, so
// that no record keeps them alive; big and keys are reused by later chunks.
type rawChunk struct {
	keys  []byte
	small strings.Builder
	big   []byte
	// per record: where its key ends in keys, and its value's extent in
	// small, or (lo as ^lo) in big.
	ends []int
	out  []*record.Activity
	err  error
}

// A chunk (one decoder's turn) ends at rawChunkSize records or once its
// buffers hold rawChunkBytes. The first chunk of a read is sized like
// the previous read's first (the first read's starts small: most reads
// are of a few records), and grows; each next one is sized from the one
// before, so that it is seldom regrown (copied while the
// scan waits) and holds little unused room (which would bring the next
// collection sooner). Decoded chunks hand their reusable buffers back for
// the next ones.
const (
	rawChunkSize  = 512
	rawChunkBytes = 192 << 10
	rawChunkFirst = 8 << 10
)

// sharedMax bounds the values kept in a chunk's string: a larger record
// is large for its outputs, which are copied anyway, and would be kept
// alive by every record of its chunk.
const sharedMax = 4 << 10

// readPools is what one read of activities hands on to the next ones,
// made on first use: the buffers of decoded chunks (the 20 reads of a
// recovery of 100,000 activities then reuse a few instead of allocating
// ~14 MB; at most 8 of at most ~200 KiB each are kept); the decoders'
// blocks of records, which the next read's decoders fill on (the
// executor reads one instance at a time, and a block of 256 records per
// decoder and read was mostly empty and kept alive by its records: 90
// MB more allocated to read 100,000 activities of 1,000 instances); and
// the size of the last read's first chunk, which the next read's first
// chunk starts with (reads of an instance each are of about the same
// size, and a string grown from a small start was copied twice and kept
// twice its bytes).
type readPools struct {
	once      sync.Once
	bufs      chan rawBufs
	blocks    chan *record.ActivityBatch
	firstSize atomic.Int64
}

func (p *readPools) get(procs int) *readPools {
	p.once.Do(func() {
		p.bufs = make(chan rawBufs, 8)
		p.blocks = make(chan *record.ActivityBatch, procs)
	})
	return p
}

// rawBufs are a decoded chunk's reusable buffers, for the next chunk.
type rawBufs struct {
	keys, big []byte
	ends      []int
}

// newRawChunk makes the chunk after prev, or (prev nil) the first of a
// read, sized for the previous read's first chunk (hint, its values'
// bytes; 0: none yet).
func newRawChunk(prev *rawChunk, free chan rawBufs, hint int64) *rawChunk {
	keys, small := rawChunkFirst/4, rawChunkFirst
	switch {
	case prev != nil:
		keys, small = len(prev.keys)+len(prev.keys)/8+1<<10, prev.small.Len()+prev.small.Len()/8+4<<10
	case hint > 0:
		small = int(hint) + int(hint)/8 + 1<<10
	}
	rc := &rawChunk{}
	// The string's buffer is never zeroed (strings.Builder), and is the
	// records' once decoded: it cannot be reused.
	rc.small.Grow(small)
	select {
	case b := <-free:
		if cap(b.keys) >= keys {
			rc.keys, rc.big, rc.ends = b.keys, b.big, b.ends
			return rc
		}
	default:
	}
	rc.keys, rc.ends = make([]byte, 0, keys), make([]int, 0, 3*rawChunkSize)
	return rc
}

func (rc *rawChunk) full() bool {
	return rc.len() == rawChunkSize || len(rc.keys)+rc.small.Len()+len(rc.big) >= rawChunkBytes
}

func (rc *rawChunk) add(c *cursor, key []byte) error {
	rc.keys = append(rc.keys, key...)
	return c.withValue(func(v []byte) error {
		if len(v) > sharedMax {
			lo := len(rc.big)
			rc.big = append(rc.big, v...)
			rc.ends = append(rc.ends, len(rc.keys), ^lo, len(rc.big))
			return nil
		}
		lo := rc.small.Len()
		rc.small.Write(v)
		rc.ends = append(rc.ends, len(rc.keys), lo, rc.small.Len())
		return nil
	})
}

func (rc *rawChunk) len() int { return len(rc.ends) / 3 }

// decode decodes the chunk's records into rc.out (rc.err: the first that
// does not decode or does not pass check).
func (rc *rawChunk) decode(ab *record.ActivityBatch, kb []byte, check func(key []byte, r *record.Activity, kb []byte) ([]byte, error)) []byte {
	rc.out = make([]*record.Activity, rc.len())
	shared := rc.small.String()
	if rc.small.Cap() > 2*len(shared)+rawChunkFirst {
		// Sized for a larger read (the previous one): the records keep
		// a copy of what they use, not the room, which a string grown
		// from a small start never had more than twice of.
		shared = strings.Clone(shared)
	}
	// The bytes of the string, for the decoder, which only reads them
	// (and copies what it keeps as bytes): no copy of the string.
	sb := unsafe.Slice(unsafe.StringData(shared), len(shared))
	k0 := 0
	for i := range rc.out {
		kend, lo, hi := rc.ends[3*i], rc.ends[3*i+1], rc.ends[3*i+2]
		k := rc.keys[k0:kend:kend]
		k0 = kend
		var r *record.Activity
		var err error
		if lo >= 0 {
			r, err = ab.DecodeShared(sb[lo:hi:hi], shared[lo:hi])
		} else {
			r, err = ab.Decode(rc.big[^lo:hi:hi])
		}
		if err == nil {
			kb, err = check(k, r, kb)
		}
		if err != nil {
			rc.err = keyError(k, err)
			break
		}
		rc.out[i] = r
	}
	return kb
}

// readActivities runs scan, which hands add the raw activity records it
// wants in the order they are to be returned, and decodes them on every
// CPU while the scan goes on (decoding dominates start-up with many
// activities), or, if they fit in one chunk, on the caller's once
// scanned. check vets each decoded record against its key; kb is a
// buffer it may reuse (and returns). The records are cut from a few
// arrays per decoder (record.ActivityBatch), which the next read's
// decoders go on filling (readPools).
func (s *Store) readActivities(what string, scan func(snap *snapshot, add func(c *cursor, key []byte) error) error, check func(key []byte, r *record.Activity, kb []byte) ([]byte, error)) ([]*record.Activity, error) {
	work := make(chan *rawChunk, 64)
	procs := runtime.GOMAXPROCS(0)
	pools := s.reads.get(procs)
	free := pools.bufs
	var chunks []*rawChunk
	decode := func(work <-chan *rawChunk) {
		// The decoder's blocks go on from where the last read's left
		// off: the executor reads an instance at a time, and a block of
		// records per decoder and read would be mostly empty (each
		// record keeps its block alive).
		var ab *record.ActivityBatch
		select {
		case ab = <-pools.blocks:
		default:
			ab = &record.ActivityBatch{}
		}
		defer func() {
			select {
			case pools.blocks <- ab:
			default:
			}
		}()
		var kb []byte
		for rc := range work {
			kb = rc.decode(ab, kb, check)
			// The records copied what they keep: the buffers go to a
			// next chunk (of this read or a later one), or to the
			// collector.
			select {
			case free <- rawBufs{keys: rc.keys[:0], big: rc.big[:0], ends: rc.ends[:0]}:
			default:
			}
			rc.keys, rc.big, rc.ends = nil, nil, nil
		}
	}
	// The decoders start with the second chunk: a read of one chunk (an
	// instance of a few hundred activities, as the executor's start
	// reads them) is decoded by the caller once scanned, without two
	// goroutines to start and wake.
	var wg sync.WaitGroup
	started := false
	send := func(rc *rawChunk) {
		if !started {
			started = true
			for range procs {
				wg.Go(func() { decode(work) })
			}
		}
		work <- rc
	}
	cur := newRawChunk(nil, free, pools.firstSize.Load())
	add := func(c *cursor, key []byte) error {
		if err := cur.add(c, key); err != nil {
			return err
		}
		if cur.full() {
			// Sized before a decoder has it (and hands its buffers on).
			next := newRawChunk(cur, free, 0)
			chunks = append(chunks, cur)
			send(cur)
			cur = next
		}
		return nil
	}
	err := s.read(what, func(snap *snapshot) error {
		if err := scan(snap, add); err != nil {
			return err
		}
		if cur.len() > 0 {
			chunks = append(chunks, cur)
			if started {
				send(cur)
			}
		}
		return nil
	})
	close(work)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if !started && len(chunks) == 1 {
		one := make(chan *rawChunk, 1)
		one <- chunks[0]
		close(one)
		decode(one)
	}
	if len(chunks) > 0 {
		pools.firstSize.Store(int64(chunks[0].small.Len()))
	}
	n := 0
	for _, rc := range chunks {
		if rc.err != nil {
			return nil, fmt.Errorf("%s: %w", what, rc.err)
		}
		n += len(rc.out)
	}
	out := make([]*record.Activity, 0, n)
	for _, rc := range chunks {
		out = append(out, rc.out...)
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
