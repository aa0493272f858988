package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	wftemporal "github.com/wf-engine/wf/executor/temporal"
	"github.com/wf-engine/wf/executor/temporal/temporaltest"
)

// BenchmarkEngines runs the same workflow on the local engine and on
// Temporal (dev server, two wf worker processes) in one run: 500 exec
// activities that fail once, each retried after a fixed 10ms. It reports,
// per engine, attempts per second and retry lateness (when the retry
// started minus when it was due, from the engine's own records) at p50 and
// p99; for Temporal also the history events per retry. Run with
// -benchtime=1x:
//
//	go test ./cmd/wf -run '^$' -bench BenchmarkEngines -benchtime=1x
func BenchmarkEngines(b *testing.B) {
	const n = 500
	var sb strings.Builder
	sb.WriteString("workflow \"bench\" {\n  key = \"k\"\n")
	for i := range n {
		fmt.Fprintf(&sb, `  activity "a%03d" {
    exec { command = ["sh", "-c", "test \"$WF_ATTEMPT\" -ge 2"] }
    retry {
      backoff = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 3
    }
  }
`, i)
	}
	sb.WriteString("}\n")
	hcl := sb.String()
	for range b.N {
		b.Run("local", func(b *testing.B) {
			dir := b.TempDir()
			writeFile(b, filepath.Join(dir, "main.wf.hcl"), hcl)
			start := time.Now()
			runWFEnv(b, nil, "apply", "-auto-approve", "-parallelism", "20", dir)
			elapsed := time.Since(start)
			hs := historyOf(b, nil, "bench/k", "-state-dir", filepath.Join(dir, ".wf"))
			report(b, hs, elapsed)
		})
		b.Run("temporal", func(b *testing.B) {
			srv := temporaltest.Need(b)
			dir := b.TempDir()
			writeFile(b, filepath.Join(dir, "main.wf.hcl"), hcl)
			env := []string{"WF_TEMPORAL_ADDRESS=" + srv.Address}
			queue := fmt.Sprintf("bench-%d", time.Now().UnixNano())
			for range 2 {
				w := startWF(b, env, "worker", "-task-queue", queue, "-parallelism", "20", dir)
				b.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
			}
			start := time.Now()
			runWFEnv(b, env, "apply", "-engine", "temporal", "-task-queue", queue, "-auto-approve", "-parallelism", "20", dir)
			elapsed := time.Since(start)
			hs := historyOf(b, env, "bench/k", "-engine", "temporal")
			report(b, hs, elapsed)
			// History events per retry, across every run of the apply.
			ctx := context.Background()
			cl, err := wftemporal.Dial(ctx, wftemporal.ClientOptions{Address: srv.Address})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			events, runs := 0, 0
			for runID := ""; ; {
				iter := cl.SDK.GetWorkflowHistory(ctx, wftemporal.WorkflowID("bench", "k"), runID, false, 0)
				next := ""
				for iter.HasNext() {
					ev, err := iter.Next()
					if err != nil {
						b.Fatal(err)
					}
					events++
					if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
						next = a.GetContinuedExecutionRunId()
					}
				}
				runs++
				if next == "" {
					break
				}
				runID = next
			}
			retries := 0
			for _, h := range hs {
				if h.Attempt > 1 {
					retries++
				}
			}
			// Each activity is one first attempt and one retry: the events
			// per activity are those of a retry plus those of a first
			// attempt; the difference is measured in the note.
			b.ReportMetric(float64(events)/float64(retries), "events/retry")
			b.ReportMetric(float64(runs), "runs")
		})
	}
}

func report(b *testing.B, hs []histEntry, elapsed time.Duration) {
	b.Helper()
	byAct := map[string][]histEntry{}
	for _, h := range hs {
		byAct[h.Activity] = append(byAct[h.Activity], h)
	}
	var late []time.Duration
	for _, as := range byAct {
		for i := 1; i < len(as); i++ {
			if as[i-1].WaitMs != nil {
				due := as[i-1].End.Add(time.Duration(*as[i-1].WaitMs) * time.Millisecond)
				late = append(late, as[i].Start.Sub(due))
			}
		}
	}
	slices.Sort(late)
	if len(late) == 0 {
		b.Fatal("no retries recorded")
	}
	b.ReportMetric(float64(len(hs))/elapsed.Seconds(), "attempts/s")
	b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "late-p50-ms")
	b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "late-p99-ms")
	b.ReportMetric(float64(len(late)), "retries")
}

func writeFile(b *testing.B, path, s string) {
	b.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		b.Fatal(err)
	}
}

// benchBinary is the wf binary of the benchmarks, built without -race.
func benchBinary(b testing.TB) string {
	b.Helper()
	benchBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "wf-bench-bin-")
		if err != nil {
			benchBin.err = err
			return
		}
		benchBin.path = filepath.Join(dir, "wf")
		out, err := exec.Command("go", "build", "-o", benchBin.path, ".").CombinedOutput()
		if err != nil {
			benchBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if benchBin.err != nil {
		b.Fatal(benchBin.err)
	}
	return benchBin.path
}

var benchBin struct {
	once sync.Once
	path string
	err  error
}

func startWF(b testing.TB, env []string, args ...string) *exec.Cmd {
	b.Helper()
	cmd := exec.Command(benchBinary(b), args...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return cmd
}

func runWFEnv(b testing.TB, env []string, args ...string) string {
	b.Helper()
	cmd := exec.Command(benchBinary(b), args...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("wf %s: %v\n%s", strings.Join(args, " "), err, tail(string(out)))
	}
	return string(out)
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

func historyOf(b testing.TB, env []string, instance string, extra ...string) []histEntry {
	b.Helper()
	out := runWFEnv(b, env, append(append([]string{"history", "-json"}, extra...), instance)...)
	var hs []histEntry
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var h histEntry
		if err := dec.Decode(&h); err != nil {
			b.Fatalf("decode history: %v", err)
		}
		hs = append(hs, h)
	}
	return hs
}
