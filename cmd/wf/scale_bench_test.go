package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/config/configtest"
)

// The scale benchmarks run wf on one workflow of N activities, in two
// shapes. "blocks": N separate activity blocks, a binary tree of
// dependencies, half through a data reference (activity.PARENT.exit_code)
// and half through depends_on, each with a named retry policy; one file
// holds at most 400,000 tokens (config.MaxTokens), about 10,000 such blocks.
// "fanout": one activity with for_each over N keys read from a
// *.auto.wfvars.json file (an HCL for expression over 100,000 elements
// exceeds config.BudgetSteps), an HTTP GET of a local server per element,
// between an upstream it reads a result of and a downstream that depends
// on all of it. The figures are whole processes
// of the real binary (wall time and the child's peak RSS) and the state's
// size on disk.
//
//	go test ./cmd/wf -run '^$' -bench 'Scale' -benchtime 1x -count 3

// scaleShape writes a workflow of n activities of the shape to dir.
func scaleShape(tb testing.TB, dir, shape string, n int) {
	tb.Helper()
	switch shape {
	case "blocks":
		scaleWorkflow(tb, dir, n)
	case "fanout":
		scaleFanOut(tb, dir, n)
	default:
		tb.Fatalf("unknown shape %q", shape)
	}
}

// scaleWorkflow writes a workflow of n activity blocks to dir/main.wf.hcl.
func scaleWorkflow(tb testing.TB, dir string, n int) {
	tb.Helper()
	writeScaleFile(tb, filepath.Join(dir, "main.wf.hcl"), configtest.Blocks(n))
}

const scaleFanOutConfig = `variable "keys" {
  type = set(string)
}

variable "url" {
  type    = string
  default = "http://127.0.0.1:9"
}

retry_policy "std" {
  initial_interval = "1s"
  maximum_interval = "2s"
  maximum_attempts = 10
}

workflow "fan" {
  activity "up" {
    exec { command = ["echo", "{\"flag\": \"x\"}"] }
  }
  activity "work" {
    for_each = var.keys
    http { url = "${var.url}/${each.key}?flag=${activity.up.result.flag}" }
    retry    = retry_policy.std
  }
  activity "after" {
    exec { command = ["true"] }
    depends_on = [activity.work]
  }
}
`

// scaleFanOut writes the fan-out workflow of n elements (n+2 activities)
// to dir, its keys in dir/keys.auto.wfvars.json.
func scaleFanOut(tb testing.TB, dir string, n int) {
	tb.Helper()
	writeScaleFile(tb, filepath.Join(dir, "main.wf.hcl"), scaleFanOutConfig)
	var b strings.Builder
	b.WriteString(`{"keys": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%06d"`, i)
	}
	b.WriteString("]}\n")
	writeScaleFile(tb, filepath.Join(dir, "keys.auto.wfvars.json"), b.String())
}

func writeScaleFile(tb testing.TB, path, s string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// scaleSizes are the workflow sizes of the scale benchmarks; SCALE_N (a
// comma-separated list) narrows them.
func scaleSizes(b *testing.B) []int {
	sizes := []int{100, 1000, 10000, 100000}
	if s := os.Getenv("SCALE_N"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("SCALE_N: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	return sizes
}

// BenchmarkScaleInProcess runs wf in this process so that -cpuprofile and
// -memprofile see config, planner and core. SCALE_ARGS is the command line
// (default "plan"; e.g. "validate", "apply -auto-approve -parallelism
// 100"), given the fan-out's server URL and the directory; SCALE_SHAPE:
// blocks or fanout (default); SCALE_PREP: a command line run first, untimed
// (e.g. "apply -auto-approve -parallelism 100" before a plan of the state).
//
//	SCALE_N=100000 SCALE_ARGS="apply -auto-approve -parallelism 100" \
//	  go test ./cmd/wf -run '^$' -bench ScaleInProcess -benchtime 1x -cpuprofile cpu.out
func BenchmarkScaleInProcess(b *testing.B) {
	args := strings.Fields(os.Getenv("SCALE_ARGS"))
	if len(args) == 0 {
		args = []string{"plan"}
	}
	shape := os.Getenv("SCALE_SHAPE")
	if shape == "" {
		shape = "fanout"
	}
	srv := newScaleServer(b)
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				scaleShape(b, dir, shape, n)
				if prep := strings.Fields(os.Getenv("SCALE_PREP")); len(prep) > 0 {
					runInProcess(b, prep, shape, srv.URL, dir)
				}
				b.StartTimer()
				runInProcess(b, args, shape, srv.URL, dir)
			}
		})
	}
}

func runInProcess(b *testing.B, args []string, shape, url, dir string) {
	argv := append(slices.Clone(args), "-no-color", dir)
	if shape == "fanout" && args[0] != "validate" {
		argv = append(slices.Clone(args), "-no-color", "-var", "url="+url, dir)
	}
	if code := run(context.Background(), argv, strings.NewReader(""), io.Discard, io.Discard, os.Environ()); code != 0 && !(args[0] == "plan" && code == 2) {
		b.Fatalf("wf %v: exit %d", argv, code)
	}
}

// scaleServer answers the fan-out's GETs: 503 while failing is set, else
// 200. It counts requests and notes when the first one after mark came.
type scaleServer struct {
	*httptest.Server
	failing  atomic.Bool
	requests atomic.Int64
	mark     atomic.Int64 // unix nanoseconds; 0 = not armed
	first    atomic.Int64 // unix nanoseconds of the first request after mark
	pid      atomic.Int64 // the process whose CPU time firstCPU reads
	firstCPU atomic.Int64 // its CPU time at the first request, nanoseconds
}

// cpuOf reads a process's user + system CPU time from /proc (0 when it
// cannot).
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

func newScaleServer(b *testing.B) *scaleServer {
	s := &scaleServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.mark.Load() != 0 && s.first.CompareAndSwap(0, time.Now().UnixNano()) {
			if pid := s.pid.Load(); pid != 0 {
				s.firstCPU.Store(int64(cpuOf(int(pid))))
			}
		}
		if s.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"ok": true}`))
	}))
	b.Cleanup(s.Close)
	return s
}

// figures is one whole-process run of wf: wall time, CPU (user + system)
// and peak RSS of the child.
type figures struct {
	wall, cpu time.Duration
	rss       int64
}

// runScale runs the wf binary in dir and returns its figures.
func runScale(b *testing.B, dir string, args ...string) figures {
	b.Helper()
	cmd := exec.Command(durBinary(b), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	rss, err := runWatched(cmd)
	wall := time.Since(start)
	if err != nil && (cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2) {
		b.Fatalf("wf %v: %v\n%.2000s", args, err, out.Bytes())
	}
	return childFigures(cmd, wall, rss)
}

// childFigures are the figures of a finished child; rss is its peak
// resident set as runWatched or watchRSS read it (not its rusage's: see
// rssWatch).
func childFigures(cmd *exec.Cmd, wall time.Duration, rss int64) figures {
	return figures{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), rss: rss}
}

// report reports the figures of one run per iteration (the benchmarks run
// with -benchtime 1x; -count gives the rounds).
func (f figures) report(b *testing.B, n int) {
	b.ReportMetric(float64(f.wall.Milliseconds()), "wall_ms")
	b.ReportMetric(float64(f.cpu.Milliseconds()), "cpu_ms")
	b.ReportMetric(float64(f.rss)/(1<<20), "peak_rss_MB")
	b.ReportMetric(float64(f.rss)/1024/float64(n), "rss_KB/activity")
	b.ReportMetric(float64(f.cpu.Microseconds())/float64(n), "cpu_us/activity")
}

// dirSize is the bytes the files under dir take on disk (allocated
// blocks, as du counts them: the store preallocates sparse files).
func dirSize(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func reportLoad(b *testing.B) {
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(l)); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				b.ReportMetric(v, "loadavg")
			}
		}
	}
}

// scaleShapes are the shapes a plan benchmark runs at n: blocks only up to
// 10,000 (the token limit of one file).
func scaleShapes(n int) []string {
	if n <= 10000 {
		return []string{"blocks", "fanout"}
	}
	return []string{"fanout"}
}

// BenchmarkScalePlan: `wf plan` of a fresh configuration of n activities.
func BenchmarkScalePlan(b *testing.B) {
	for _, n := range scaleSizes(b) {
		for _, shape := range scaleShapes(n) {
			b.Run(fmt.Sprintf("shape=%s/n=%d", shape, n), func(b *testing.B) {
				dir := b.TempDir()
				scaleShape(b, dir, shape, n)
				for b.Loop() {
					f := runScale(b, dir, "plan", "-no-color", ".")
					f.report(b, n)
				}
				reportLoad(b)
			})
		}
	}
}

// BenchmarkScaleValidate: `wf validate` of n activities.
func BenchmarkScaleValidate(b *testing.B) {
	for _, n := range scaleSizes(b) {
		for _, shape := range scaleShapes(n) {
			b.Run(fmt.Sprintf("shape=%s/n=%d", shape, n), func(b *testing.B) {
				dir := b.TempDir()
				scaleShape(b, dir, shape, n)
				for b.Loop() {
					f := runScale(b, dir, "validate", ".")
					f.report(b, n)
				}
				reportLoad(b)
			})
		}
	}
}

// BenchmarkScaleApply: `wf apply` of the fan-out of n elements, every GET
// answered at once, at -parallelism 100; then the plan of the state it
// leaves (all unchanged) and the state's size on disk; beside it the same
// n GETs made 100 at a time without wf (raw_gets_ms; ratio = wf / raw).
func BenchmarkScaleApply(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			srv := newScaleServer(b)
			var state int64
			var plan figures
			for b.Loop() {
				dir := b.TempDir()
				scaleShape(b, dir, "fanout", n)
				f := runScale(b, dir, "apply", "-auto-approve", "-parallelism", "100", "-var", "url="+srv.URL, ".")
				f.report(b, n)
				state = dirSize(b, filepath.Join(dir, ".wf"))
				plan = runScale(b, dir, "plan", "-detailed-exitcode", "-var", "url="+srv.URL, ".")
				raw := rawGets(b, srv.URL, n, 100)
				b.ReportMetric(float64(raw.Milliseconds()), "raw_gets_ms")
				b.ReportMetric(float64(f.wall)/float64(raw), "ratio")
			}
			b.ReportMetric(float64(state)/(1<<20), "state_MB")
			b.ReportMetric(float64(state)/float64(n), "state_B/activity")
			b.ReportMetric(float64(plan.wall.Milliseconds()), "unchanged_plan_wall_ms")
			b.ReportMetric(float64(plan.cpu.Milliseconds()), "unchanged_plan_cpu_ms")
			b.ReportMetric(float64(plan.rss)/(1<<20), "unchanged_plan_rss_MB")
			reportLoad(b)
		})
	}
}

// rawGets makes n GETs of the server's element URLs, par at a time, with
// nothing recorded: the floor under the apply's wall time.
func rawGets(b *testing.B, url string, n, par int) time.Duration {
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: par}}
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				resp, err := client.Get(fmt.Sprintf("%s/k%06d?flag=x", url, i))
				if err != nil {
					b.Error(err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return time.Since(start)
}

// BenchmarkScaleRecover: an apply of the fan-out of n elements whose GETs
// all fail (503) is killed with SIGKILL once every element has failed its
// first attempt and the records are durable, leaving n retry timers; by
// the time wf apply runs again they are all due. It reports the time from
// the restart to the first retried request the server sees
// (first_retry_ms; first_retry_cpu_ms is the restarted process's CPU time
// by then, from /proc), and to the end of the apply once the server answers
// again (recover_ms), with the restarted process's CPU and peak RSS.
func BenchmarkScaleRecover(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			srv := newScaleServer(b)
			var state int64
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				scaleShape(b, dir, "fanout", n)
				srv.failing.Store(true)
				srv.mark.Store(0)
				srv.first.Store(0)
				srv.pid.Store(0)
				srv.firstCPU.Store(0)
				srv.requests.Store(0)
				args := []string{"apply", "-auto-approve", "-parallelism", "100", "-var", "url=" + srv.URL, "."}
				cmd := exec.Command(durBinary(b), args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "NO_COLOR=1")
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				for srv.requests.Load() < int64(n) {
					time.Sleep(20 * time.Millisecond)
				}
				// Group commit makes a result durable within milliseconds;
				// 1 s of margin on a loaded machine.
				time.Sleep(time.Second)
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				// Every timer due (maximum_interval 2s) before the restart.
				time.Sleep(2 * time.Second)
				state = dirSize(b, filepath.Join(dir, ".wf"))
				srv.failing.Store(false)
				b.StartTimer()

				start := time.Now()
				srv.mark.Store(start.UnixNano())
				re := exec.Command(durBinary(b), args...)
				re.Dir = dir
				re.Env = cmd.Env
				var out strings.Builder
				re.Stdout, re.Stderr = &out, &out
				if err := re.Start(); err != nil {
					b.Fatal(err)
				}
				srv.pid.Store(int64(re.Process.Pid))
				watch := watchRSS(re.Process.Pid)
				err := re.Wait()
				rss := watch.stop()
				if err != nil {
					b.Fatalf("restarted apply: %v\n%.2000s", err, out.String())
				}
				f := childFigures(re, time.Since(start), rss)
				if srv.first.Load() == 0 {
					b.Fatal("the restarted apply retried nothing")
				}
				b.ReportMetric(float64(time.Duration(srv.first.Load()-start.UnixNano()).Milliseconds()), "first_retry_ms")
				b.ReportMetric(float64(time.Duration(srv.firstCPU.Load()).Milliseconds()), "first_retry_cpu_ms")
				b.ReportMetric(float64(f.wall.Milliseconds()), "recover_ms")
				b.ReportMetric(float64(f.cpu.Milliseconds()), "cpu_ms")
				b.ReportMetric(float64(f.rss)/(1<<20), "peak_rss_MB")
			}
			b.ReportMetric(float64(state)/(1<<20), "state_MB")
			reportLoad(b)
		})
	}
}
