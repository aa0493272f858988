package executor

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile"
)

// fanOutElements and fanOutParallelism are the apply benchmark's shape:
// a 10,000-element for_each of `exec true`, 50 at a time.
const (
	fanOutElements    = 10000
	fanOutParallelism = 50
)

const fanOutExecTrue = `workflow "fan" {
  activity "up" {
    exec { command = ["echo", "{\"flag\": \"x\"}"] }
  }
  activity "work" {
    for_each = toset([for p in setproduct(range(100), range(100)) : format("k%02d%02d", p[0], p[1])])
    exec { command = ["true", each.key, activity.up.result.flag] }
    retry {
      maximum_attempts = 3
      initial_interval = "1s"
    }
  }
}`

// BenchmarkForEachExecTrue10k: the 10,000 elements (and their upstream)
// through the whole engine, real runner and real statefile, 50 at a time.
// Compare with BenchmarkRawSpawn10k.
func BenchmarkForEachExecTrue10k(b *testing.B) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true(1)")
	}
	cfg := loadConfig(b, fanOutExecTrue)
	runner := activity.NewRunner(activity.Options{TempDir: b.TempDir()})
	b.Cleanup(func() { _ = runner.Close() })
	var commits timedStore
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st, err := statefile.Open(b.TempDir(), statefile.Options{Command: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		commits.Store = st
		bus := event.NewBus()
		sub := bus.Subscribe()
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for {
				if _, ok := sub.Next(context.Background()); !ok {
					return
				}
			}
		}()
		b.StartTimer()
		run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: commits.run(), Runner: runner, Bus: bus, Parallelism: fanOutParallelism})
		if err != nil {
			b.Fatal(err)
		}
		out, err := run.Wait()
		b.StopTimer()
		bus.Close()
		<-drained
		if err != nil || out.Status != event.StatusSucceeded || out.Summary.Succeeded != fanOutElements+1 {
			b.Fatalf("run: %+v %v", out, err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(commits.n)/float64(b.N), "commits/op")
	b.ReportMetric(float64(commits.total.Microseconds())/1000/float64(b.N), "commit_ms/op")
}

// BenchmarkRawSpawn10k is the reference: 10,001 `true` processes, 50 at a
// time, with nothing recorded.
func BenchmarkRawSpawn10k(b *testing.B) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true(1)")
	}
	for range b.N {
		work := make(chan struct{})
		var wg sync.WaitGroup
		for range fanOutParallelism {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					if err := exec.Command("true").Run(); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		start := time.Now()
		for range fanOutElements + 1 {
			work <- struct{}{}
		}
		close(work)
		wg.Wait()
		_ = start
	}
}
