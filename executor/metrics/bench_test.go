package metrics_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/metrics"
	"github.com/wf-engine/wf/statefile"
)

// rounds is even by default so that off and on run first equally often.
var rounds = flag.Int("metrics.rounds", 6, "off/on rounds of the metrics overhead benchmarks")

// engineRun runs cfg through the real executor and store with a draining
// subscriber (what a view costs at least) and, when on, metrics following
// the bus too, until the metrics have seen the last event.
func engineRun(b *testing.B, cfg *config.Config, runner executor.AttemptRunner, on bool, want int) sample {
	b.Helper()
	st, err := statefile.Open(filepath.Join(b.TempDir(), ".wf"), statefile.Options{Command: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var insts []core.Instance
	for _, w := range cfg.Workflows {
		insts = append(insts, core.Instance{Workflow: w})
	}
	bus := event.NewBus()
	view := bus.Subscribe()
	viewDone := make(chan struct{})
	go func() {
		defer close(viewDone)
		for {
			if _, ok := view.Next(context.Background()); !ok {
				return
			}
		}
	}()
	var m *metrics.Metrics
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if on {
		m = metrics.Start(ctx, bus.Subscribe(), metrics.Options{NoRuntime: true})
	}
	cpu0 := cpuTime(b)
	start := time.Now()
	run, err := executor.Start(context.Background(), executor.Options{Config: cfg, Instances: insts, Store: st, Runner: runner, Bus: bus, Parallelism: 10})
	if err != nil {
		b.Fatal(err)
	}
	out, err := run.Wait()
	bus.Close()
	<-viewDone
	if m != nil {
		stop() // as wf apply does at exit: count what is queued, now
		m.Wait()
	}
	elapsed := time.Since(start)
	cpu := cpuTime(b) - cpu0
	if err != nil || out.Summary.Succeeded != want {
		b.Fatalf("run: %+v %v", out, err)
	}
	return sample{wall: elapsed, cpu: cpu}
}

// sample is one run: wall-clock time, and the CPU time of this process
// (user and system, children not included), which the other engineers'
// load on the machine disturbs less.
type sample struct{ wall, cpu time.Duration }

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// onOff runs off and on alternately (the order flips every round, so a
// slow phase of the shared machine hits both) and reports min, median and
// max of each and the ratios of the medians, for wall-clock and CPU time.
func onOff(b *testing.B, run func(on bool) sample) {
	var off, on []sample
	for b.Loop() {
		for r := range *rounds {
			first := r%2 == 0
			for _, o := range []bool{first, !first} {
				if o {
					on = append(on, run(true))
				} else {
					off = append(off, run(false))
				}
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, k := range []struct {
		name string
		get  func(sample) time.Duration
	}{{"wall", func(s sample) time.Duration { return s.wall }}, {"cpu", func(s sample) time.Duration { return s.cpu }}} {
		var a, c []time.Duration
		for i := range off {
			a = append(a, k.get(off[i]))
			c = append(c, k.get(on[i]))
		}
		slices.Sort(a)
		slices.Sort(c)
		b.ReportMetric(ms(a[0]), "off_"+k.name+"_min_ms")
		b.ReportMetric(ms(a[len(a)/2]), "off_"+k.name+"_med_ms")
		b.ReportMetric(ms(a[len(a)-1]), "off_"+k.name+"_max_ms")
		b.ReportMetric(ms(c[0]), "on_"+k.name+"_min_ms")
		b.ReportMetric(ms(c[len(c)/2]), "on_"+k.name+"_med_ms")
		b.ReportMetric(ms(c[len(c)-1]), "on_"+k.name+"_max_ms")
		b.ReportMetric(float64(c[len(c)/2])/float64(a[len(a)/2]), k.name+"_on/off")
	}
}

func benchConfig(b *testing.B, src string) *config.Config {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	return cfg
}

// BenchmarkExecTrue1000Metrics: 1,000 `exec true` activities at
// parallelism 10 through the real runner and store, metrics off and on.
func BenchmarkExecTrue1000Metrics(b *testing.B) {
	if _, err := exec.LookPath("true"); err != nil {
		b.Skip("no true(1)")
	}
	var src strings.Builder
	src.WriteString("workflow \"spawn\" {\n")
	for i := range 1000 {
		fmt.Fprintf(&src, "  activity \"t%d\" {\n    exec { command = [\"true\"] }\n  }\n", i)
	}
	src.WriteString("}\n")
	cfg := benchConfig(b, src.String())
	runner := activity.NewRunner(activity.Options{TempDir: b.TempDir(), BaseEnv: []string{"PATH=" + os.Getenv("PATH")}})
	defer runner.Close()
	onOff(b, func(on bool) sample { return engineRun(b, cfg, runner, on, 1000) })
}

// stormRunner fails every attempt before the 7th at once, with no process:
// the engine's own cost of a retry storm.
type stormRunner struct{}

func (stormRunner) Run(_ context.Context, req activity.Request) activity.Result {
	now := time.Now()
	res := activity.Result{Start: now, End: now, Outputs: []byte(`{}`)}
	if req.Attempt < 7 {
		res.Failure = &activity.Failure{Type: "http:503", Message: "unavailable"}
	}
	return res
}

// BenchmarkRetryStorm1000Metrics: 1,000 activities failing 6 times each
// (7,000 attempts, 6,000 durable retry timers of 1ms) through the real
// executor and store, metrics off and on.
func BenchmarkRetryStorm1000Metrics(b *testing.B) {
	var src strings.Builder
	src.WriteString("workflow \"storm\" {\n")
	for i := range 1000 {
		fmt.Fprintf(&src, "  activity \"a%d\" {\n    exec { command = [\"x\"] }\n    retry {\n      backoff = \"fixed\"\n      initial_interval = \"1ms\"\n      maximum_attempts = 7\n    }\n  }\n", i)
	}
	src.WriteString("}\n")
	cfg := benchConfig(b, src.String())
	onOff(b, func(on bool) sample { return engineRun(b, cfg, stormRunner{}, on, 1000) })
}

// fill gives m n activities of one workflow with attempts attempts each
// (every one but the last failing, so each has retries, delays and an
// error type), one budget and the lateness histogram in use.
func fill(m *metrics.Metrics, n, attempts int) {
	now := time.Now()
	usage := &event.BudgetUsage{Name: "api", Used: 3, MaxRetries: 10, WindowMs: 60000, Stamps: []time.Time{now, now, now}}
	evs := make([]event.Event, 0, 4*attempts)
	for i := range n {
		act := fmt.Sprintf("activity.step_%05d", i)
		ev := func(typ event.Type, attempt int) event.Event {
			return event.Event{Time: now, Type: typ, Workflow: "storm", Instance: "storm/k", Activity: act, Kind: "exec", Attempt: attempt, Budget: usage}
		}
		evs = evs[:0]
		for a := 1; a <= attempts; a++ {
			st := ev(event.AttemptStarted, a)
			if a > 1 {
				st.PreviousError = &event.Error{Type: "http:503"}
				st.ScheduledAt = &now
			}
			evs = append(evs, st)
			if a < attempts {
				f := ev(event.AttemptFailed, a)
				f.Error, f.DurationMs = &event.Error{Type: "http:503"}, event.Ms(12*time.Millisecond)
				r := ev(event.RetryScheduled, a+1)
				r.DelayMs = event.Ms(time.Second)
				evs = append(evs, f, r)
			} else {
				s := ev(event.AttemptSucceeded, a)
				s.DurationMs = event.Ms(8 * time.Millisecond)
				evs = append(evs, s, ev(event.ActivitySucceeded, a))
			}
		}
		m.Observe(evs)
	}
}

// BenchmarkScrape10k: one GET /metrics of a run with 10,000 activities,
// over loopback HTTP, read to the end; beside it, the same number of bytes
// served from memory by the same kind of server (the physical limit).
func BenchmarkScrape10k(b *testing.B) {
	for _, tc := range []struct {
		name     string
		attempts int
	}{{"succeeded", 1}, {"retried7", 7}} {
		b.Run(tc.name, func(b *testing.B) {
			m := metrics.New(metrics.Options{})
			fill(m, 10000, tc.attempts)
			srv := httptest.NewServer(m.Handler())
			defer srv.Close()
			body := get(b, srv.URL)
			static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				w.Write(body)
			}))
			defer static.Close()
			var scrape, raw []time.Duration
			for b.Loop() {
				t := time.Now()
				get(b, srv.URL)
				scrape = append(scrape, time.Since(t))
				t = time.Now()
				get(b, static.URL)
				raw = append(raw, time.Since(t))
			}
			slices.Sort(scrape)
			slices.Sort(raw)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(scrape[len(scrape)/2]), "scrape_med_ms")
			b.ReportMetric(ms(scrape[len(scrape)-1]), "scrape_max_ms")
			b.ReportMetric(ms(raw[len(raw)/2]), "static_med_ms")
			b.ReportMetric(float64(len(body))/1e6, "MB")
			b.ReportMetric(float64(strings.Count(string(body), "\n")), "lines")
		})
	}
}

func get(b *testing.B, url string) []byte {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkObserve is the cost per event of keeping the metrics.
func BenchmarkObserve(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	for b.Loop() {
		fill(m, 1000, 7) // 21,000 events
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/21000, "ns/event")
}

// BenchmarkEncode10k is the text encoding alone of BenchmarkScrape10k.
func BenchmarkEncode10k(b *testing.B) {
	for _, attempts := range []int{1, 7} {
		b.Run(fmt.Sprint(attempts), func(b *testing.B) {
			m := metrics.New(metrics.Options{NoRuntime: true})
			fill(m, 10000, attempts)
			var buf []byte
			for b.Loop() {
				buf = m.AppendText(buf[:0])
			}
			b.ReportMetric(float64(len(buf))/1e6, "MB")
		})
	}
}

// BenchmarkScrape10kCollector is the same scrape through client_golang's
// generic path: the Collector in a registry, served by promhttp. It is
// why Handler has its own encoder.
func BenchmarkScrape10kCollector(b *testing.B) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	fill(m, 10000, 7)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true}))
	defer srv.Close()
	var n int
	for b.Loop() {
		n = len(get(b, srv.URL))
	}
	b.ReportMetric(float64(n)/1e6, "MB")
}
