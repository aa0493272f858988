package executor

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

const recoverTimers = 100000

// blockingRunner holds every attempt until the run is cancelled, so the
// benchmark measures recovery, not process spawning.
type blockingRunner struct{}

func (blockingRunner) Run(ctx context.Context, req activity.Request) activity.Result {
	start := time.Now()
	<-ctx.Done()
	return activity.Result{Start: start, End: time.Now(), Failure: &activity.Failure{Type: "interrupted"}}
}

// BenchmarkRecover100kDueTimers: a state holding 100,000 activities, each
// waiting on a retry timer that fell due while wf was not running (as after
// a kill -9). Measured: open the store, load it, fire every due timer (each
// moves its activity to the run queue) and make the first attempts durable:
// the time from `wf apply` opening the state to the first retried attempt
// being recorded and started.
func BenchmarkRecover100kDueTimers(b *testing.B) {
	// One file holds at most config.MaxTokens tokens (about 8,000 such
	// activities), so the 100,000 are spread over workflows of their own
	// files, as a large configuration would be. Each file loads on its
	// own: loading all of them at once takes more CPU than the loader's
	// 10 s backstop (config.BudgetCPU) on this shared machine.
	const workflows = 20
	var wfs []*config.Workflow
	var cfg *config.Config
	for w := range workflows {
		var src strings.Builder
		fmt.Fprintf(&src, "workflow \"rec%02d\" {\n", w)
		for i := range recoverTimers / workflows {
			fmt.Fprintf(&src, "  activity \"a%d\" {\n    exec { command = [\"true\"] }\n    retry { maximum_attempts = 5 }\n  }\n", i)
		}
		src.WriteString("}\n")
		c, diags := config.LoadFiles(b.TempDir(), map[string][]byte{fmt.Sprintf("rec%02d.wf.hcl", w): []byte(src.String())}, config.LoadOptions{})
		if diags.HasErrors() {
			b.Fatalf("load config: %s", diags.Error())
		}
		if cfg == nil {
			cfg = c
		}
		wfs = append(wfs, c.Workflows...)
	}

	dir := b.TempDir()
	st, err := statefile.Open(dir, statefile.Options{Command: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	due := now.Add(-time.Second)
	var insts []core.Instance
	for _, wf := range wfs {
		insts = append(insts, core.Instance{Workflow: wf, Modes: map[string]core.Mode{}})
		muts := make([]record.Mutation, 0, recoverTimers/workflows+1)
		muts = append(muts, record.Mutation{Instance: &record.Instance{Workflow: wf.Name, Key: wf.Key, Created: now, Updated: now}})
		for i := range recoverTimers / workflows {
			name := fmt.Sprintf("a%d", i)
			muts = append(muts, record.Mutation{Activity: &record.Activity{
				Workflow: wf.Name, Instance: wf.Key, Name: name,
				Generation: 1, IdempotencyKey: core.IdempotencyKey(core.KeyInput{StateID: st.ID(), Workflow: wf.Name, Instance: wf.Key, Activity: name, InstanceCreated: now, Generation: 1}),
				Status: record.StatusWaiting, Attempts: 1, RuleCounts: []int{1},
				FirstStart: due.Add(-time.Second), LastDelay: time.Second,
				Timer: &record.Timer{Kind: record.TimerRetry, FireAt: due, Attempt: 2, Set: due.Add(-time.Second), Delay: time.Second, Source: "policy"},
			}})
		}
		if err := st.Commit(muts); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}

	var (
		fired                        int
		total, opening, loading, cpu time.Duration
	)
	b.ResetTimer()
	for range b.N {
		t0, c0 := time.Now(), cpuTime()
		st, err := statefile.Open(dir, statefile.Options{Command: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		opened := time.Now()
		opening += opened.Sub(t0)
		bus := event.NewBus()
		sub := bus.Subscribe()
		ctx, cancel := context.WithCancel(context.Background())
		run, err := Start(ctx, Options{
			Config:    cfg,
			Instances: insts,
			Store:     st, Runner: blockingRunner{}, Bus: bus, Parallelism: 10,
		})
		if err != nil {
			b.Fatal(err)
		}
		loading += time.Since(opened)
		// The first attempt_started is published only after the commit
		// that recorded it, and after the core fired every due timer.
		recovered, started := 0, 0
		for started == 0 {
			batch, ok := sub.Next(context.Background())
			if !ok {
				b.Fatal("run ended before any attempt started")
			}
			for _, e := range batch {
				switch e.Type {
				case event.TimerRecovered:
					recovered++
				case event.AttemptStarted:
					started++
				}
			}
		}
		b.StopTimer()
		elapsed := time.Since(t0)
		used := cpuTime() - c0
		cpu += used
		// Each round, for min / median / max in docs/performance.md.
		b.Logf("first retried attempt after %v (%v of CPU)", elapsed.Round(time.Millisecond), used.Round(time.Millisecond))
		if recovered != recoverTimers {
			b.Fatalf("%d timers recovered, want %d", recovered, recoverTimers)
		}
		fired = recovered
		cancel()
		run.Stop()
		if _, err := run.Wait(); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		total += elapsed
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms_to_first_retry")
	b.ReportMetric(float64(fired), "timers_fired")
	// Where the time goes: statefile.Open, then Start (load every
	// activity, build the core, fire the due timers, commit the first
	// starts); the rest is reaching the first attempt_started event.
	b.ReportMetric(float64(opening.Milliseconds())/float64(b.N), "open_ms")
	b.ReportMetric(float64(loading.Milliseconds())/float64(b.N), "start_ms")
	// CPU time of the whole process (GC and Badger included): on a shared
	// machine the wall time is mostly waiting for a CPU.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu_ms")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
