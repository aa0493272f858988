package executor

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile"
)

const (
	lateTimers = 10000
	// Fire times are spread over [lateStart, lateStart+lateSpread].
	lateStart  = 200 * time.Millisecond
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
	var src strings.Builder
	src.WriteString("workflow \"late\" {\n")
	for i := range lateTimers {
		fmt.Fprintf(&src, "  activity \"s%d\" {\n    sleep { duration = %q }\n  }\n", i, sleepDuration(i).String())
	}
	src.WriteString("}\n")
	cfg := loadConfig(b, src.String())
	var late []time.Duration
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
		run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: st, Runner: &fakeRunner{clock: realClock{}}, Bus: bus})
		if err != nil {
			b.Fatal(err)
		}
		out, err := run.Wait()
		b.StopTimer()
		if err != nil || out.Status != event.StatusSucceeded {
			b.Fatalf("run: %+v %v", out, err)
		}
		waitForB(b, func() bool { mu.Lock(); defer mu.Unlock(); return len(fired) == lateTimers })
		cancel()
		<-done
		nlate, lastLate := 0, 0
		for i := range lateTimers {
			name := fmt.Sprintf("activity.s%d", i)
			l := fired[name].Sub(started[name].Add(sleepDuration(i)))
			if l > 10*time.Millisecond && debugLate {
				nlate++
				lastLate = i
			}
			late = append(late, l)
		}
		b.Logf("late>10ms: %d, last %d", nlate, lastLate)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportLateness(b, late)
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

var debugLate = true

const spawnCount = 1000

// BenchmarkExecTrue1000: 1,000 independent `true` activities at
// parallelism 10 through the whole engine (real runner, real store).
func BenchmarkExecTrue1000(b *testing.B) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true(1)")
	}
	var src strings.Builder
	src.WriteString("workflow \"spawn\" {\n")
	for i := range spawnCount {
		fmt.Fprintf(&src, "  activity \"t%d\" {\n    exec { command = [\"true\"] }\n  }\n", i)
	}
	src.WriteString("}\n")
	cfg := loadConfig(b, src.String())
	runner := activity.NewRunner(activity.Options{TempDir: b.TempDir()})
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st, err := statefile.Open(b.TempDir(), statefile.Options{Command: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: st, Runner: runner, Parallelism: 10})
		if err != nil {
			b.Fatal(err)
		}
		out, err := run.Wait()
		b.StopTimer()
		if err != nil || out.Status != event.StatusSucceeded || out.Summary.Succeeded != spawnCount {
			b.Fatalf("run: %+v %v", out, err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkRawSpawn1000 is the reference: 1,000 `true` processes, 10 at a
// time, with nothing recorded.
func BenchmarkRawSpawn1000(b *testing.B) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true(1)")
	}
	for range b.N {
		sem := make(chan struct{}, 10)
		var wg sync.WaitGroup
		for range spawnCount {
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
	}
}
