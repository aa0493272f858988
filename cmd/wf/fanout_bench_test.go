package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The fan-out benchmarks run the real binary on a 10,000-element for_each
// (each element with a retry block and a reference to an upstream
// output): the first plan, the apply of `exec true` at -parallelism 50
// beside spawning the same processes 50 at a time without wf (measured in
// the same run, reported as a ratio), and the plan of the state it leaves.
// Targets (docs/performance.md): plans < 1 s and < 200 MB peak RSS, the
// apply within 1.5x of the raw spawning.
//
//	go test ./cmd/wf -run '^$' -bench FanOut -benchtime 1x -count 3

const fanOutBench = `workflow "fan" {
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

// timeBinary runs the wf binary and returns its wall time and peak RSS;
// cpu adds the CPU time (user + system) it used, which a loaded machine
// stretches less than the wall time.
func timeBinary(b *testing.B, dir string, args ...string) (time.Duration, int64) {
	took, rss, _ := runBinaryCPU(b, dir, args...)
	return took, rss
}

func runBinaryCPU(b *testing.B, dir string, args ...string) (time.Duration, int64, time.Duration) {
	b.Helper()
	cmd := exec.Command(durBinary(b), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	rss, err := runWatched(cmd)
	took := time.Since(start)
	if err != nil {
		b.Fatalf("wf %v: %v\n%.2000s", args, err, out.Bytes())
	}
	return took, rss, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

func fanOutDir(b *testing.B) string {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(fanOutBench), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

func BenchmarkFanOutPlan(b *testing.B) {
	dir := fanOutDir(b)
	var took, cpu time.Duration
	var rss int64
	for b.Loop() {
		t, r, c := runBinaryCPU(b, dir, "plan", ".")
		took += t
		cpu += c
		rss = max(rss, r)
	}
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "wall_ms/op")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu_ms/op")
	b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MB")
}

func BenchmarkFanOutApply(b *testing.B) {
	var wfTook, rawTook time.Duration
	var rss int64
	for b.Loop() {
		dir := fanOutDir(b)
		t, r := timeBinary(b, dir, "apply", "-auto-approve", "-parallelism", "50", ".")
		wfTook += t
		rss = max(rss, r)
		rawTook += rawSpawn(b, 10001, 50)
	}
	b.ReportMetric(float64(wfTook.Milliseconds())/float64(b.N), "wf_ms/op")
	b.ReportMetric(float64(rawTook.Milliseconds())/float64(b.N), "raw_ms/op")
	b.ReportMetric(float64(wfTook)/float64(rawTook), "ratio")
	b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MB")
}

func BenchmarkFanOutPlanUnchanged(b *testing.B) {
	dir := fanOutDir(b)
	timeBinary(b, dir, "apply", "-auto-approve", "-parallelism", "50", ".")
	var took, cpu time.Duration
	var rss int64
	for b.Loop() {
		t, r, c := runBinaryCPU(b, dir, "plan", "-detailed-exitcode", ".")
		took += t
		cpu += c
		rss = max(rss, r)
	}
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "wall_ms/op")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu_ms/op")
	b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MB")
}

// rawSpawn runs n `true` processes, par at a time, with nothing recorded.
func rawSpawn(b *testing.B, n, par int) time.Duration {
	start := time.Now()
	work := make(chan struct{})
	var wg sync.WaitGroup
	for range par {
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
	for range n {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	return time.Since(start)
}
