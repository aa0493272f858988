package statefile

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

// idealGroup is the second reference of BenchmarkCommitGroup: the best
// group commit that writers of its shape can get from this disk and this
// scheduler, with none of a store's work. Each of the writers appends the
// bytes of one encoded attempt to a shared buffer and waits until a sync
// covers them; one syncer writes everything queued with one write and one
// fdatasync and wakes the writers it covered. The syncer knows how many
// writers are still running and starts a sync only once all of them have
// queued, which no store can know (callers do not announce themselves), so
// every batch holds the whole crowd: an upper bound for group commit at
// this concurrency, not a design to copy.
//
// The raw limit (rawRate, 100 records per fdatasync from one thread) asks
// for more than any group commit at 64 writers can give: a batch holds at
// most one record per writer, and between two syncs every writer must wake
// and queue again, which on 2 cores is a sizeable part of a sync.
//
// Two knobs make variants of it that are closer to what wf does (measured
// beside it; docs/performance/statefile.md): prealloc writes into a
// preallocated, zero-filled file at sector-aligned offsets, as wf's log
// segments are written, instead of appending (an append makes every
// fdatasync commit the file's new size to the journal too); encode makes
// each writer build and encode its record (the benchmark's attempt, its key
// and value as Commit encodes them) before it queues, the work every
// caller of any store does between two commits.
type idealGroup struct {
	prealloc, encode bool

	records int
	elapsed time.Duration
	batches int
	f       *os.File // the preallocated file, kept across runs
}

// idealFileSize holds one run of BenchmarkCommitGroup (2,048 records, each
// batch starting on a sector) several times over.
const idealFileSize = 8 << 20

func (g *idealGroup) file(b *testing.B, dir string) *os.File {
	if !g.prealloc {
		f, err := os.OpenFile(filepath.Join(dir, "ideal.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	if g.f == nil {
		f, err := os.OpenFile(filepath.Join(dir, "ideal-prealloc.log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if err := preallocate(f, idealFileSize); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		g.f = f
		b.Cleanup(func() { f.Close() })
	}
	return g.f
}

func (g *idealGroup) run(b *testing.B, dir string, writers, perWriter int) {
	rec, err := record.Encode(benchAttempt(123456))
	if err != nil {
		b.Fatal(err)
	}
	f := g.file(b, dir)
	if !g.prealloc {
		defer f.Close()
	}
	var off int64 // where the next batch goes in the preallocated file

	var (
		mu       sync.Mutex
		queued   = sync.NewCond(&mu) // the syncer waits here for the crowd
		synced   = sync.NewCond(&mu) // writers wait here for their sync
		buf      []byte
		waiting  int // writers whose record is in buf
		active   = writers
		gen      = uint64(1) // the sync that will carry buf
		durable  uint64      // the last sync done
		syncErr  error
		batches  int
		spare    []byte
		syncDone = make(chan struct{})
	)
	go func() {
		defer close(syncDone)
		for {
			mu.Lock()
			for waiting < active {
				queued.Wait()
			}
			if waiting == 0 { // every writer is done
				mu.Unlock()
				return
			}
			out, my := buf, gen
			buf, waiting, gen = spare[:0], 0, gen+1
			mu.Unlock()

			var err error
			if g.prealloc {
				if off+int64(len(out)) > idealFileSize {
					off = 0
				}
				_, err = f.WriteAt(out, off)
				off += alignUp(int64(len(out)))
			} else {
				_, err = f.Write(out)
			}
			if err == nil {
				err = syscall.Fdatasync(int(f.Fd()))
			}
			spare = out
			mu.Lock()
			batches++
			durable = my
			if err != nil && syncErr == nil {
				syncErr = err
			}
			synced.Broadcast()
			mu.Unlock()
		}
	}()

	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				r := rec
				if g.encode {
					ops, err := encodeMutations([]record.Mutation{{Attempt: benchAttempt(w*perWriter + i)}})
					if err != nil {
						b.Error(err)
						break // still leave the crowd below
					}
					r = append(ops[0].key, ops[0].val...)
				}
				mu.Lock()
				buf = append(buf, r...)
				waiting++
				my := gen
				if waiting == active {
					queued.Signal()
				}
				for durable < my {
					synced.Wait()
				}
				mu.Unlock()
			}
			mu.Lock()
			active--
			if waiting == active {
				queued.Signal()
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	g.elapsed += time.Since(start)
	<-syncDone
	if syncErr != nil {
		b.Fatal(syncErr)
	}
	g.records += writers * perWriter
	g.batches += batches
}

func (g *idealGroup) rate() float64 { return float64(g.records) / g.elapsed.Seconds() }
