package statefile

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

// Each benchmark op is a fixed chunk of work (not one record) so that a
// small -benchtime=Nx still measures thousands of records; the custom
// metrics are what to read.

func benchAttempt(n int) *record.Attempt {
	return att("bench", "instance-1", fmt.Sprintf("activity-%d", n%50), 1, n)
}

// BenchmarkCommitGroup: 64 goroutines each committing one attempt per
// Commit, the executor's worst case; group commit merges them. Each
// iteration also runs the physical limit (rawFdatasync: 100 records' bytes
// per fdatasync, in the same directory) so that the ratio compares runs
// taken under the same load, the same limit at 64 records per fdatasync
// (the most one batch of 64 one-record writers can carry: ratio_raw64),
// and an ideal group commit of the same 64 writers with no store work
// (idealgroup_test.go): what any group commit of this shape can reach on
// this disk and these cores, with two variants closer to wf (its file
// preallocated like wf's log; and writers that also encode their record).
func BenchmarkCommitGroup(b *testing.B) {
	const workers, perWorker = 64, 32
	dir := b.TempDir()
	s := openT(b, filepath.Join(dir, ".wf"))
	defer closeT(b, s)
	var seq atomic.Int64
	b0, r0 := s.batches.Load(), s.batchedReqs.Load()
	var elapsed, cpu time.Duration
	var raw rawRate
	raw64 := rawRate{perSync: workers}
	var ideal idealGroup
	idealPrealloc := idealGroup{prealloc: true}
	idealEncode := idealGroup{prealloc: true, encode: true}
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		c0 := cpuTime()
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
		elapsed += time.Since(start)
		cpu += cpuTime() - c0
		raw.run(b, dir, 20)
		raw64.run(b, dir, 20)
		ideal.run(b, dir, workers, perWorker)
		idealPrealloc.run(b, dir, workers, perWorker)
		idealEncode.run(b, dir, workers, perWorker)
	}
	rate := float64(seq.Load()) / elapsed.Seconds()
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(raw.rate(), "raw_records/s")
	b.ReportMetric(rate/raw.rate(), "ratio")
	b.ReportMetric(raw64.rate(), "raw64_records/s")
	b.ReportMetric(rate/raw64.rate(), "ratio_raw64")
	b.ReportMetric(ideal.rate(), "ideal_records/s")
	b.ReportMetric(ideal.rate()/raw.rate(), "ideal_ratio")
	b.ReportMetric(rate/ideal.rate(), "of_ideal")
	b.ReportMetric(float64(ideal.records)/float64(ideal.batches), "ideal_records/batch")
	b.ReportMetric(idealPrealloc.rate()/raw.rate(), "ideal_prealloc_ratio")
	b.ReportMetric(idealEncode.rate()/raw.rate(), "ideal_encode_ratio")
	b.ReportMetric(rate/idealEncode.rate(), "of_ideal_encode")
	b.ReportMetric(float64(s.batchedReqs.Load()-r0)/float64(s.batches.Load()-b0), "commits/batch")
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(seq.Load()), "cpu_µs/record")
	reportSplit(b, s)
}

// reportSplit reports the mean time per batch spent in the log (write and
// fdatasync) and in Badger.
func reportSplit(b *testing.B, s *Store) {
	n := float64(s.batches.Load())
	b.ReportMetric(float64(s.w.logTime.Microseconds())/n, "log_µs/batch")
	b.ReportMetric(float64(s.w.applyTime.Microseconds())/n, "apply_µs/batch")
}

// BenchmarkCommitBatch100: one goroutine, 100 attempts per Commit, beside
// the raw limit like BenchmarkCommitGroup.
func BenchmarkCommitBatch100(b *testing.B) {
	const commits, perCommit = 10, 100
	dir := b.TempDir()
	s := openT(b, filepath.Join(dir, ".wf"))
	defer closeT(b, s)
	n := 0
	muts := make([]record.Mutation, perCommit)
	var elapsed time.Duration
	var raw rawRate
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		for range commits {
			for i := range muts {
				n++
				muts[i] = record.Mutation{Attempt: benchAttempt(n)}
			}
			if err := s.Commit(muts); err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(start)
		raw.run(b, dir, commits)
	}
	rate := float64(n) / elapsed.Seconds()
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(raw.rate(), "raw_records/s")
	b.ReportMetric(rate/raw.rate(), "ratio")
	reportSplit(b, s)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawRate accumulates the physical limit: syncs of perSync (100 unless
// set) encoded attempts appended to a plain file, each followed by
// fdatasync.
type rawRate struct {
	perSync int
	records int
	elapsed time.Duration
}

func (r *rawRate) run(b *testing.B, dir string, syncs int) {
	perSync := r.perSync
	if perSync == 0 {
		perSync = 100
	}
	rec, err := record.Encode(benchAttempt(123456))
	if err != nil {
		b.Fatal(err)
	}
	chunk := bytes.Repeat(rec, perSync)
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	for range syncs {
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	r.elapsed += time.Since(start)
	r.records += syncs * perSync
}

func (r *rawRate) rate() float64 { return float64(r.records) / r.elapsed.Seconds() }

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

// reopenState builds a state with 100,000 activities with a pending
// timer and closes it.
func reopenState(b *testing.B) string {
	const activities, batch = 100_000, 2_000
	dir := filepath.Join(b.TempDir(), ".wf")
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
	return dir
}

// BenchmarkReopen100kTimers: start-up cost with 100,000 pending timers
// (Open with every check, PendingTimers, Close), beside Badger alone
// opening the same tables and scanning the same keys (timer index and
// activities, values copied, nothing decoded or checked), interleaved:
// once opened read-only, once for writing (plainReopen).
func BenchmarkReopen100kTimers(b *testing.B) {
	const activities = 100_000
	dir := reopenState(b)
	var ours, oursCPU, oursOpen time.Duration
	var plain plainReopen
	b.ResetTimer()
	for range b.N {
		start, c0 := time.Now(), cpuTime()
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		oursOpen += time.Since(start)
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
		ours += time.Since(start)
		oursCPU += cpuTime() - c0

		plain.run(b, filepath.Join(dir, dbName), 2*activities, tableTimer, tableActivity)
	}
	plain.report(b, ours, oursCPU, oursOpen)
}

// plainReopen is the limit of a reopen benchmark: Badger alone, with
// wf's options, opening the state's tables and scanning the same keys
// (values copied, nothing decoded or checked), twice per iteration. Read-
// only is the cheapest open Badger has (no memtable, no value log to
// create); for writing is the open wf itself must make to apply, and
// the one a plain Badger program makes (badger.Open's default), so the
// issue's "Badger's own open + scan" is judged against it
// (docs/performance/statefile.md). Both are reported.
type plainReopen struct {
	ro, rw plainTimes
}

type plainTimes struct{ wall, cpu, open time.Duration }

func (p *plainReopen) run(b *testing.B, dbDir string, want int, tables ...byte) {
	for _, side := range []struct {
		t        *plainTimes
		readOnly bool
	}{{&p.ro, true}, {&p.rw, false}} {
		start, c0 := time.Now(), cpuTime()
		if n := plainBadgerScan(b, dbDir, side.readOnly, &side.t.open, tables...); n != want {
			b.Fatalf("plain scan (read-only %v) found %d keys, want %d", side.readOnly, n, want)
		}
		side.t.wall += time.Since(start)
		side.t.cpu += cpuTime() - c0
	}
}

// report reports a reopen benchmark's times beside both plain scans',
// wall and CPU, and the share of opening in each (Open's every check of
// the files, against Badger's two opens: most of what a reopen costs
// beyond a plain scan besides decoding). The CPU is the process's (every
// thread, Badger's background work included): on a machine shared with
// other builds, wall time is mostly waiting for a CPU.
func (p *plainReopen) report(b *testing.B, ours, oursCPU, oursOpen time.Duration) {
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(ours), "ms/reopen")
	b.ReportMetric(ms(oursCPU), "cpu_ms/reopen")
	b.ReportMetric(ms(oursOpen), "open_ms")
	// Read-only: plain_*, ratio, cpu_ratio (the names of the first runs).
	b.ReportMetric(ms(p.ro.wall), "plain_ms")
	b.ReportMetric(ms(p.ro.cpu), "plain_cpu_ms")
	b.ReportMetric(ms(p.ro.open), "plain_open_ms")
	b.ReportMetric(float64(ours)/float64(p.ro.wall), "ratio")
	b.ReportMetric(float64(oursCPU)/float64(p.ro.cpu), "cpu_ratio")
	// For writing: plain_rw_*, rw_ratio, rw_cpu_ratio.
	b.ReportMetric(ms(p.rw.wall), "plain_rw_ms")
	b.ReportMetric(ms(p.rw.cpu), "plain_rw_cpu_ms")
	b.ReportMetric(ms(p.rw.open), "plain_rw_open_ms")
	b.ReportMetric(float64(ours)/float64(p.rw.wall), "rw_ratio")
	b.ReportMetric(float64(oursCPU)/float64(p.rw.cpu), "rw_cpu_ratio")
}

// BenchmarkReopen100kActivities: what the start of `wf apply`
// (executor.Start) reads of the same state: Open, the activities of its
// 1,000 instances (ActivitiesOf, one read of the workflow's instances,
// as Start reads them), Close; beside Badger alone opening the state and
// scanning the activity table (plainReopen), interleaved.
// BenchmarkReopen100kTimers reads the timer index and joins it with the
// activities instead, which only `wf state check` does.
func BenchmarkReopen100kActivities(b *testing.B) {
	const activities, instances = 100_000, 1_000
	dir := reopenState(b)
	keys := make([]string, instances)
	for i := range keys {
		keys[i] = fmt.Sprintf("instance-%d", i)
	}
	var ours, oursCPU, oursOpen, read, readCPU, closing time.Duration
	var plain plainReopen
	b.ResetTimer()
	for range b.N {
		start, c0 := time.Now(), cpuTime()
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		oursOpen += time.Since(start)
		t, c1 := time.Now(), cpuTime()
		byKey, err := s.ActivitiesOf("bench", keys)
		if err != nil {
			b.Fatal(err)
		}
		read += time.Since(t)
		readCPU += cpuTime() - c1
		n := 0
		for _, acts := range byKey {
			n += len(acts)
		}
		if n != activities {
			b.Fatalf("%d activities, want %d", n, activities)
		}
		t = time.Now()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		closing += time.Since(t)
		ours += time.Since(start)
		oursCPU += cpuTime() - c0

		plain.run(b, filepath.Join(dir, dbName), activities, tableActivity)
	}
	plain.report(b, ours, oursCPU, oursOpen)
	// The read and Close of the wf side, beside open_ms.
	b.ReportMetric(float64(read.Microseconds())/1000/float64(b.N), "read_ms")
	b.ReportMetric(float64(readCPU.Microseconds())/1000/float64(b.N), "read_cpu_ms")
	b.ReportMetric(float64(closing.Microseconds())/1000/float64(b.N), "close_ms")
}

// plainBadgerScan opens db/ with Badger alone (wf's options, read-only
// or for writing) and reads every key and value of the given tables,
// copying the values; the open's time is added to open.
func plainBadgerScan(b *testing.B, dbDir string, readOnly bool, open *time.Duration, tables ...byte) int {
	start := time.Now()
	db, err := badger.Open(badgerOptions(dbDir, nil).WithReadOnly(readOnly))
	if err != nil {
		b.Fatal(err)
	}
	*open += time.Since(start)
	defer func() {
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}()
	n := 0
	err = db.View(func(txn *badger.Txn) error {
		for _, p := range tables {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
			for it.Rewind(); it.Valid(); it.Next() {
				if _, err := it.Item().ValueCopy(nil); err != nil {
					it.Close()
					return err
				}
				n++
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkRecover100kTimersAfterCrash: the same state, but what kill -9
// leaves after the last 2,000 records were committed (memtable logs to
// discard, a log to replay); one fresh crash image per iteration.
func BenchmarkRecover100kTimersAfterCrash(b *testing.B) {
	const activities = 100_000
	dir := reopenState(b)
	s := openT(b, dir)
	var muts []record.Mutation
	for i := range 2000 {
		muts = append(muts, record.Mutation{Activity: act("bench", fmt.Sprintf("instance-%d", i/100), fmt.Sprintf("activity-%d", i%100), true)})
	}
	commitT(b, s, muts...)
	crash := filepath.Join(b.TempDir(), "crash")
	copyTreeB(b, dir, crash)
	closeT(b, s)
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		img := filepath.Join(b.TempDir(), fmt.Sprint("img", i))
		copyTreeB(b, crash, img)
		b.StartTimer()
		start := time.Now()
		s, err := Open(img, Options{})
		if err != nil {
			b.Fatal(err)
		}
		timers, err := s.PendingTimers()
		if err != nil || len(timers) != activities {
			b.Fatalf("%d timers, %v", len(timers), err)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/recover")
}

func copyTreeB(b *testing.B, src, dst string) {
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		return copySparse(in, target)
	})
	if err != nil {
		b.Fatal(err)
	}
}
