package executor

import (
	"context"
	"fmt"
	"os/exec"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

const (
	lateTimers = 10000
	// Fire times are spread over [lateStart, lateStart+lateSpread]. The
	// offset keeps the one-off first commit of 20,000 records (reported
	// separately as start_ms) out of the timer measurement.
	lateStart  = 3 * time.Second
	lateSpread = 2 * time.Second
)

func sleepDuration(i int) time.Duration {
	return lateStart + time.Duration(i)*lateSpread/lateTimers
}

func reportLateness(b *testing.B, late []time.Duration) {
	slices.Sort(late)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(late[len(late)/2]), "p50_ms")
	b.ReportMetric(ms(late[len(late)*99/100]), "p99_ms")
	b.ReportMetric(ms(late[len(late)-1]), "max_ms")
}

// BenchmarkTimerLateness10k: 10,000 durable sleep timers spread over 2s,
// real clock and real store; lateness is the time the core saw the tick
// minus the recorded fire time.
func BenchmarkTimerLateness10k(b *testing.B) {
	timerLateness(b, func(st *statefile.Store) Store { return st })
}

// BenchmarkTimerLatenessMemStore10k is the same with an in-memory store,
// to separate the engine's own cost from the store's.
func BenchmarkTimerLatenessMemStore10k(b *testing.B) {
	timerLateness(b, func(*statefile.Store) Store { return newMemStore() })
}

func timerLateness(b *testing.B, store func(*statefile.Store) Store) {
	var src strings.Builder
	src.WriteString("workflow \"late\" {\n")
	for i := range lateTimers {
		fmt.Fprintf(&src, "  activity \"s%d\" {\n    sleep { duration = %q }\n  }\n", i, sleepDuration(i).String())
	}
	src.WriteString("}\n")
	cfg := loadConfig(b, src.String())
	var (
		late       []time.Duration
		startTotal time.Duration
		gcs        uint32
	)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st, err := statefile.Open(b.TempDir(), statefile.Options{Command: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		bus := event.NewBus()
		sub := bus.Subscribe()
		var (
			mu      sync.Mutex
			started = map[string]time.Time{}
			fired   = map[string]time.Time{}
		)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				batch, ok := sub.Next(ctx)
				if !ok {
					return
				}
				mu.Lock()
				for _, e := range batch {
					switch e.Type {
					case event.AttemptStarted:
						started[e.Activity] = e.Time
					case event.ActivitySucceeded:
						fired[e.Activity] = e.Time
					}
				}
				mu.Unlock()
			}
		}()
		b.StartTimer()
		t := time.Now()
		run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store(st), Runner: &fakeRunner{clock: realClock{}}, Bus: bus})
		if err != nil {
			b.Fatal(err)
		}
		startTotal += time.Since(t)
		gc0 := numGC()
		out, err := run.Wait()
		b.StopTimer()
		gcs += numGC() - gc0
		if err != nil || out.Status != event.StatusSucceeded {
			b.Fatalf("run: %+v %v", out, err)
		}
		waitForB(b, func() bool { mu.Lock(); defer mu.Unlock(); return len(fired) == lateTimers })
		cancel()
		<-done
		for i := range lateTimers {
			name := fmt.Sprintf("activity.s%d", i)
			l := fired[name].Sub(started[name].Add(sleepDuration(i)))
			late = append(late, l)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(startTotal.Milliseconds())/float64(b.N), "start_ms")
	// Collections while the timers fire: a mark phase takes CPU from the
	// loop (assists, a mark worker) and, with a runtime timer as its
	// wake-up, made every timer due during it late (clock_linux.go), so a
	// high p99 is read beside this.
	b.ReportMetric(float64(gcs)/float64(b.N), "gcs_firing")
	reportLateness(b, late)
}

// numGC is how many collections have completed, cheaply enough to call
// around a run (runtime/metrics: no stop-the-world, as ReadMemStats has).
func numGC() uint32 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return uint32(s[0].Value.Uint64())
}

// BenchmarkGoTimerLateness is the physical reference: plain runtime timers
// over the same spread.
func BenchmarkGoTimerLateness(b *testing.B) {
	var late []time.Duration
	for range b.N {
		got := make([]time.Duration, lateTimers)
		var wg sync.WaitGroup
		wg.Add(lateTimers)
		base := time.Now()
		for i := range lateTimers {
			at := base.Add(sleepDuration(i))
			time.AfterFunc(time.Until(at), func() {
				got[i] = time.Since(at)
				wg.Done()
			})
		}
		wg.Wait()
		late = append(late, got...)
	}
	reportLateness(b, late)
}

func waitForB(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

const spawnCount = 1000

// BenchmarkExecTrue1000: 1,000 independent `true` activities at
// parallelism 10 through the whole engine (real runner, real store).
func BenchmarkExecTrue1000(b *testing.B) {
	execTrue(b, spawnCount, 10, func(st *statefile.Store) Store { return st })
}

// BenchmarkExecTrue10k50: 10,000 independent `true` activities at
// parallelism 50 through the whole engine; compare with
// BenchmarkRawSpawn10k50 (target: within 1.2x).
func BenchmarkExecTrue10k50(b *testing.B) {
	execTrue(b, 10*spawnCount, 50, func(st *statefile.Store) Store { return st })
}

// BenchmarkExecTrueMemStore1000 is the same with an in-memory store.
func BenchmarkExecTrueMemStore1000(b *testing.B) {
	execTrue(b, spawnCount, 10, func(*statefile.Store) Store { return newMemStore() })
}

func execTrue(b *testing.B, count, parallelism int, store func(*statefile.Store) Store) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true(1)")
	}
	var src strings.Builder
	src.WriteString("workflow \"spawn\" {\n")
	for i := range count {
		fmt.Fprintf(&src, "  activity \"t%d\" {\n    exec { command = [\"true\"] }\n  }\n", i)
	}
	src.WriteString("}\n")
	cfg := loadConfig(b, src.String())
	runner := activity.NewRunner(activity.Options{TempDir: b.TempDir()})
	b.Cleanup(func() {
		if err := runner.Close(); err != nil {
			b.Error(err)
		}
	})
	var (
		commits timedStore
		timed   = &timedRunner{AttemptRunner: runner}
		elapsed time.Duration
		launch  []time.Duration
		used    spawnCPU
	)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st, err := statefile.Open(b.TempDir(), statefile.Options{Command: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		commits.use(store(st))
		var spans []commitSpan
		commits.spans = &spans
		timed.starts = timed.starts[:0]
		b.StartTimer()
		began := time.Now()
		cpu0 := readSpawnCPU()
		run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: commits.run(), Runner: timed, Parallelism: parallelism})
		if err != nil {
			b.Fatal(err)
		}
		out, err := run.Wait()
		b.StopTimer()
		used.add(cpu0, readSpawnCPU())
		elapsed += time.Since(began)
		if err != nil || out.Status != event.StatusSucceeded || out.Summary.Succeeded != count {
			b.Fatalf("run: %+v %v", out, err)
		}
		launch = append(launch, launchDelays(spans, timed.starts)...)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(launch)
	// From the end of a commit to the start of an attempt it made
	// durable: the hand-over to a worker.
	b.ReportMetric(float64(launch[len(launch)/2])/1e6, "launch_p50_ms")
	b.ReportMetric(float64(launch[len(launch)*9/10])/1e6, "launch_p90_ms")
	// How much of the run the engine spent waiting for its store: commits
	// are serial (one committer), so commit_ms/op close to ns/op means the
	// store paces the run.
	b.ReportMetric(float64(commits.n)/float64(b.N), "commits/op")
	b.ReportMetric(float64(commits.total.Microseconds())/1000/float64(b.N), "commit_ms/op")
	b.ReportMetric(float64(commits.first.Microseconds())/1000/float64(b.N), "first_commit_ms/op")
	// The time spent writing spawn records on their own (not carried by
	// a commit), per attempt. Before the committer wrote them, each
	// worker waited for its own here (2.6 ms at a load of 1.8).
	b.ReportMetric(float64(commits.spawnNanos.Load())/1e3/float64(b.N)/float64(count), "spawn_record_us/attempt")
	// The share of the slots' time spent inside Runner.Run: the rest is a
	// slot waiting for the engine (a step, a commit) to start its next
	// attempt. Raw spawning is 100% by construction.
	b.ReportMetric(100*float64(timed.busy.Load())/float64(int64(parallelism)*int64(elapsed)), "slot_busy_%")
	used.report(b, count)
}

// spawnCPU sums the CPU time of the benchmark's process (every goroutine:
// engine, store, GC) and of the child processes it waited for, from
// getrusage: on a shared machine the wall time is mostly waiting for a CPU,
// and the CPU an attempt costs beside the spawn itself is the engine's.
type spawnCPU struct{ self, children time.Duration }

func readSpawnCPU() spawnCPU {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return spawnCPU{}
	}
	cpu := func(ru *syscall.Rusage) time.Duration { return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()) }
	return spawnCPU{self: cpu(&self), children: cpu(&children)}
}

func (c *spawnCPU) add(from, to spawnCPU) {
	c.self += to.self - from.self
	c.children += to.children - from.children
}

// report gives the CPU per attempt (per process for raw spawning) of
// b.N runs of count attempts each.
func (c *spawnCPU) report(b *testing.B, count int) {
	n := float64(b.N) * float64(count)
	b.ReportMetric(float64(c.self.Microseconds())/n, "cpu_us/attempt")
	b.ReportMetric(float64(c.children.Microseconds())/n, "child_cpu_us/attempt")
}

// timedRunner sums the time attempts spend in the wrapped runner and
// notes when each began.
type timedRunner struct {
	AttemptRunner
	busy   atomic.Int64 // nanoseconds
	mu     sync.Mutex
	starts []time.Time
}

func (r *timedRunner) Run(ctx context.Context, req activity.Request) activity.Result {
	t := time.Now()
	r.mu.Lock()
	r.starts = append(r.starts, t)
	r.mu.Unlock()
	res := r.AttemptRunner.Run(ctx, req)
	r.busy.Add(int64(time.Since(t)))
	return res
}

// launchDelays returns, for each attempt start, the time since the last
// commit that ended before it: a lower bound of the wait between the
// commit of its start record and the start, since an attempt can begin
// only after its own commit (which is that one or an earlier one).
func launchDelays(spans []commitSpan, starts []time.Time) []time.Duration {
	ends := make([]time.Time, len(spans))
	for i, sp := range spans {
		ends[i] = sp.start.Add(sp.took)
	}
	slices.SortFunc(ends, time.Time.Compare)
	out := make([]time.Duration, 0, len(starts))
	for _, t := range starts {
		i, _ := slices.BinarySearchFunc(ends, t, time.Time.Compare)
		if i > 0 {
			out = append(out, t.Sub(ends[i-1]))
		}
	}
	return out
}

// timedStore counts and times a Store's commits. The executor commits from
// one goroutine at a time, so plain fields suffice.
type timedStore struct {
	Store
	n     int
	total time.Duration
	// spans, when not nil, gets every commit's start, duration and size.
	spans *[]commitSpan
	// spawnNanos sums the time the spawn records written on their own
	// (RecordSpawns) took.
	spawnNanos atomic.Int64
	// first sums the first commit of each run (use starts a run): the
	// plan's records and the first attempts, all in one transaction.
	first time.Duration
	fresh bool
}

// use makes st the store of the next run.
func (s *timedStore) use(st Store) {
	s.Store = st
	s.fresh = true
}

// run is the Store to give Start: s itself, or, when the wrapped store is
// a whole state store, s with every optional part of one passed through
// (spawn records, the identity the idempotency keys come from, instance,
// attempt and breaker records), so that the run does all a real apply
// does. The embedded Store interface alone hides them: a run on s would
// skip the spawn record of every exec attempt.
func (s *timedStore) run() Store {
	if full, ok := s.Store.(wholeStore); ok {
		return &timedWholeStore{timedStore: s, whole: full}
	}
	return s
}

// wholeStore is what *statefile.Store offers beyond Store.
type wholeStore interface {
	spawnStore
	identified
	instanceReader
	attemptReader
	breakerReader
}

var _ wholeStore = (*statefile.Store)(nil)

type timedWholeStore struct {
	*timedStore
	whole wholeStore
}

func (s *timedWholeStore) RecordSpawns(sps []*record.Spawn) error {
	t := time.Now()
	err := s.whole.RecordSpawns(sps)
	s.spawnNanos.Add(int64(time.Since(t)))
	return err
}
func (s *timedWholeStore) Spawns(workflow, key string) (map[string]*record.Spawn, error) {
	return s.whole.Spawns(workflow, key)
}
func (s *timedWholeStore) ID() string { return s.whole.ID() }
func (s *timedWholeStore) Instance(workflow, key string) (*record.Instance, error) {
	return s.whole.Instance(workflow, key)
}
func (s *timedWholeStore) Attempts(workflow, key, activity string) ([]*record.Attempt, error) {
	return s.whole.Attempts(workflow, key, activity)
}
func (s *timedWholeStore) Breakers() (map[string]*record.Breaker, error) { return s.whole.Breakers() }

type commitSpan struct {
	start     time.Time
	took      time.Duration
	mutations int
}

func (s *timedStore) Commit(ms []record.Mutation) error {
	t := time.Now()
	err := s.Store.Commit(ms)
	d := time.Since(t)
	s.total += d
	s.n++
	if s.fresh {
		s.first += d
		s.fresh = false
	}
	if s.spans != nil {
		*s.spans = append(*s.spans, commitSpan{t, d, len(ms)})
	}
	return err
}

// BenchmarkRawSpawn1000 is the reference: 1,000 `true` processes, 10 at a
// time, with nothing recorded.
func BenchmarkRawSpawn1000(b *testing.B) { rawSpawn(b, spawnCount, 10) }

// BenchmarkRawSpawn10k50 is the reference of BenchmarkExecTrue10k50:
// 10,000 `true` processes, 50 at a time.
func BenchmarkRawSpawn10k50(b *testing.B) { rawSpawn(b, 10*spawnCount, 50) }

// rawSpawn forks with the Ps a run reserves for forks (reserveForkProcs),
// as wf does: the limit is raw spawning with the scheduler wf has, not
// with fewer.
func rawSpawn(b *testing.B, count, parallelism int) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true(1)")
	}
	release := reserveForkProcs(parallelism)
	defer release()
	var used spawnCPU
	for range b.N {
		cpu0 := readSpawnCPU()
		sem := make(chan struct{}, parallelism)
		var wg sync.WaitGroup
		for range count {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := exec.Command("true").Run(); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		used.add(cpu0, readSpawnCPU())
	}
	used.report(b, count)
}
