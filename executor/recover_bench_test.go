package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
	var src strings.Builder
	src.WriteString("workflow \"rec\" {\n")
	for i := range recoverTimers {
		fmt.Fprintf(&src, "  activity \"a%d\" {\n    exec { command = [\"true\"] }\n    retry { maximum_attempts = 5 }\n  }\n", i)
	}
	src.WriteString("}\n")
	cfg := loadConfig(b, src.String())
	wf := cfg.Workflows[0]

	dir := b.TempDir()
	st, err := statefile.Open(dir, statefile.Options{Command: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	due := now.Add(-time.Second)
	muts := make([]record.Mutation, 0, recoverTimers+1)
	muts = append(muts, record.Mutation{Instance: &record.Instance{Workflow: wf.Name, Key: wf.Key, Created: now, Updated: now}})
	for i := range recoverTimers {
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
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}

	var (
		fired int
		total time.Duration
	)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		st, err := statefile.Open(dir, statefile.Options{Command: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		bus := event.NewBus()
		sub := bus.Subscribe()
		ctx, cancel := context.WithCancel(context.Background())
		run, err := Start(ctx, Options{
			Config:    cfg,
			Instances: []core.Instance{{Workflow: wf, Modes: map[string]core.Mode{}}},
			Store:     st, Runner: blockingRunner{}, Bus: bus, Parallelism: 10,
		})
		if err != nil {
			b.Fatal(err)
		}
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
}
