package statefile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

// Each benchmark op is a fixed chunk of work (not one record) so that a
// small -benchtime=Nx still measures thousands of records; the custom
// metrics are what to read.

func benchAttempt(n int) *record.Attempt {
	return att("bench", "instance-1", fmt.Sprintf("activity-%d", n%50), 1, n)
}

// BenchmarkCommitGroup: 64 goroutines each committing one attempt per
// Commit, the executor's worst case; group commit merges them.
func BenchmarkCommitGroup(b *testing.B) {
	const workers, perWorker = 64, 32
	s := openT(b, b.TempDir())
	defer closeT(b, s)
	var seq atomic.Int64
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range perWorker {
					n := int(seq.Add(1))
					if err := s.Commit([]record.Mutation{{Attempt: benchAttempt(n)}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(seq.Load())/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(s.batchedReqs.Load())/float64(s.batches.Load()), "commits/batch")
}

// BenchmarkCommitBatch100: one goroutine, 100 attempts per Commit.
func BenchmarkCommitBatch100(b *testing.B) {
	const commits, perCommit = 10, 100
	s := openT(b, b.TempDir())
	defer closeT(b, s)
	n := 0
	muts := make([]record.Mutation, perCommit)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for range commits {
			for i := range muts {
				n++
				muts[i] = record.Mutation{Attempt: benchAttempt(n)}
			}
			if err := s.Commit(muts); err != nil {
				b.Fatal(err)
			}
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
}

// BenchmarkRawFdatasync100 is the physical limit the store is measured
// against: the bytes of 100 encoded attempts appended to a plain file,
// then one fdatasync.
func BenchmarkRawFdatasync100(b *testing.B) {
	const syncs, perSync = 10, 100
	rec, err := record.Encode(benchAttempt(123456))
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 0, len(rec)*perSync)
	for range perSync {
		chunk = append(chunk, rec...)
	}
	f, err := os.Create(filepath.Join(b.TempDir(), "raw.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	n := 0
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for range syncs {
			if _, err := f.Write(chunk); err != nil {
				b.Fatal(err)
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(n*perSync)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "syncs/s")
	b.ReportMetric(float64(len(rec)), "bytes/record")
}

// BenchmarkReopen100kTimers: start-up cost with 100,000 pending timers.
func BenchmarkReopen100kTimers(b *testing.B) {
	const activities, batch = 100_000, 2_000
	dir := b.TempDir()
	s := openT(b, dir)
	muts := make([]record.Mutation, 0, batch)
	for i := range activities {
		a := act("bench", fmt.Sprintf("instance-%d", i/100), fmt.Sprintf("activity-%d", i%100), true)
		muts = append(muts, record.Mutation{Activity: a})
		if len(muts) == batch {
			commitT(b, s, muts...)
			muts = muts[:0]
		}
	}
	closeT(b, s)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		timers, err := s.PendingTimers()
		if err != nil {
			b.Fatal(err)
		}
		if len(timers) != activities {
			b.Fatalf("%d timers, want %d", len(timers), activities)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/reopen")
}
