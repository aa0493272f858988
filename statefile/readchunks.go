package statefile

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/wf-engine/wf/statefile/record"
)

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
	// groups are out by instance, when the read asks for them (made by
	// the decoder: ActivitiesOf).
	groups []instanceActs
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
	chunks, err := s.readChunks(what, scan, check, nil)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, rc := range chunks {
		n += len(rc.out)
	}
	out := make([]*record.Activity, 0, n)
	for _, rc := range chunks {
		out = append(out, rc.out...)
	}
	return out, nil
}

// readChunks is readActivities without the records put together: it
// returns the decoded chunks, in order, every one without error. after,
// unless nil, is run by the decoder on each chunk it decoded without
// error (while the scan goes on).
func (s *Store) readChunks(what string, scan func(snap *snapshot, add func(c *cursor, key []byte) error) error, check func(key []byte, r *record.Activity, kb []byte) ([]byte, error), after func(rc *rawChunk)) ([]*rawChunk, error) {
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
			if after != nil && rc.err == nil {
				after(rc)
			}
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
	for _, rc := range chunks {
		if rc.err != nil {
			return nil, fmt.Errorf("%s: %w", what, rc.err)
		}
	}
	return chunks, nil
}
