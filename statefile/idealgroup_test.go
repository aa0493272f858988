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
type idealGroup struct {
	records int
	elapsed time.Duration
	batches int
}

func (g *idealGroup) run(b *testing.B, dir string, writers, perWriter int) {
	rec, err := record.Encode(benchAttempt(123456))
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "ideal.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()

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

			_, err := f.Write(out)
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
	for range writers {
		wg.Go(func() {
			for range perWriter {
				mu.Lock()
				buf = append(buf, rec...)
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
