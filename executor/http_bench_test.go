package executor

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile"
)

// loopback is the server of the http benchmarks: it answers on 127.0.0.1,
// counts the TCP connections it accepted and, when failFirst is set, fails
// the first request of every Idempotency-Key with a 503 (the retry of the
// same activity carries the same key and succeeds).
type loopback struct {
	srv   *httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	seen  map[string]bool
}

func newLoopback(b *testing.B, failFirst bool) *loopback {
	b.Helper()
	l := &loopback{seen: map[string]bool{}}
	l.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failFirst {
			key := r.Header.Get("Idempotency-Key")
			l.mu.Lock()
			first := !l.seen[key]
			l.seen[key] = true
			l.mu.Unlock()
			if first {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "try again")
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	l.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			l.conns.Add(1)
		}
	}
	// The listener's backlog must take a whole burst of new connections.
	l.srv.Start()
	b.Cleanup(l.srv.Close)
	return l
}

// reset forgets the keys seen and returns the connections counted so far.
func (l *loopback) reset() int64 {
	l.srv.CloseClientConnections()
	l.mu.Lock()
	clear(l.seen)
	l.mu.Unlock()
	return l.conns.Swap(0)
}

// httpWorkflow is n independent http activities against url, each retried
// once after a fixed 10 ms when it fails.
func httpWorkflow(name string, n int, url string) string {
	var src strings.Builder
	fmt.Fprintf(&src, "workflow %q {\n", name)
	for i := range n {
		fmt.Fprintf(&src, `  activity "h%d" {
    http { url = %q }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 2
    }
  }
`, i, url)
	}
	src.WriteString("}\n")
	return src.String()
}

// runHTTPWorkflow runs cfg through the whole engine (real runner, real
// store) and returns the store, still open, and how long the run took.
func runHTTPWorkflow(b *testing.B, cfg *config.Config, parallelism int, runner AttemptRunner, commits *timedStore) (*statefile.Store, time.Duration) {
	b.Helper()
	st, err := statefile.Open(b.TempDir(), statefile.Options{Command: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	commits.use(st)
	began := time.Now()
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: commits.run(), Runner: runner, Parallelism: parallelism})
	if err != nil {
		b.Fatal(err)
	}
	out, err := run.Wait()
	elapsed := time.Since(began)
	if err != nil || out.Status != event.StatusSucceeded {
		b.Fatalf("run: %+v %v", out, err)
	}
	return st, elapsed
}

const (
	httpCount       = 10000
	httpParallelism = 100
)

// BenchmarkHTTP10k: 10,000 http activities (GET, 200, small JSON body) at
// parallelism 100 through the whole engine, real store, against a loopback
// Go server; in the same iteration, the physical reference: a plain Go
// client making the same 10,000 requests from 100 goroutines against the
// same server, with a transport that keeps 100 idle connections. of_raw is
// wf's throughput as a share of the raw client's (target >= 0.5); conns
// are the TCP connections each side opened; slot_busy_% is the share of
// the slots' time spent in requests; launch_p* the time from the end of
// a commit to the start of an attempt it made durable.
func BenchmarkHTTP10k(b *testing.B) {
	srv := newLoopback(b, false)
	cfg := loadConfig(b, httpWorkflow("get", httpCount, srv.srv.URL))
	var commits timedStore
	var busy time.Duration
	var wfTotal, rawTotal time.Duration
	var wfConns, rawConns int64
	var ratios []float64
	var launch []time.Duration
	var wfCPU, rawCPU time.Duration
	var wfMem, rawMem heapUse
	var wfPs, rawPs procTime
	for i := range b.N {
		// Alternate which side goes first so both see the same load.
		var wfD, rawD time.Duration
		sides := []func(){
			func() {
				runner := activity.NewRunner(activity.Options{TempDir: b.TempDir(), Parallelism: httpParallelism})
				timed := &timedRunner{AttemptRunner: runner}
				var spans []commitSpan
				commits.spans = &spans
				cpu, mem, ps := processCPU(), readHeapUse(), readProcTime()
				st, d := runHTTPWorkflow(b, cfg, httpParallelism, timed, &commits)
				wfCPU += processCPU() - cpu
				wfPs = wfPs.add(readProcTime().sub(ps))
				wfMem = wfMem.add(readHeapUse().sub(mem))
				launch = append(launch, launchDelays(spans, timed.starts)...)
				busy += time.Duration(timed.busy.Load())
				wfD = d
				wfConns += srv.reset()
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				_ = runner.Close()
			},
			func() {
				cpu, mem, ps := processCPU(), readHeapUse(), readProcTime()
				rawD = rawHTTP(b, srv.srv.URL, httpCount, httpParallelism)
				rawCPU += processCPU() - cpu
				rawPs = rawPs.add(readProcTime().sub(ps))
				rawMem = rawMem.add(readHeapUse().sub(mem))
				rawConns += srv.reset()
			},
		}
		if i%2 == 1 {
			slices.Reverse(sides)
		}
		for _, f := range sides {
			f()
		}
		wfTotal += wfD
		rawTotal += rawD
		ratios = append(ratios, rawD.Seconds()/wfD.Seconds())
	}
	n := float64(b.N)
	b.ReportMetric(wfTotal.Seconds()/n, "wf_s")
	b.ReportMetric(rawTotal.Seconds()/n, "raw_s")
	b.ReportMetric(float64(httpCount)*n/wfTotal.Seconds(), "wf_req/s")
	b.ReportMetric(float64(httpCount)*n/rawTotal.Seconds(), "raw_req/s")
	b.ReportMetric(rawTotal.Seconds()/wfTotal.Seconds(), "of_raw")
	b.ReportMetric(float64(wfConns)/n, "wf_conns")
	b.ReportMetric(float64(rawConns)/n, "raw_conns")
	b.ReportMetric(float64(commits.n)/n, "commits/op")
	b.ReportMetric(float64(commits.total.Microseconds())/1000/n, "commit_ms/op")
	b.ReportMetric(float64(commits.first.Microseconds())/1000/n, "first_commit_ms/op")
	b.ReportMetric(100*busy.Seconds()/(httpParallelism*wfTotal.Seconds()), "slot_busy_%")
	// The committer is the one goroutine every attempt passes through
	// twice (its start, its result): the share of the run it spent in
	// Commit. The loop's share is small beside it (the core's step, a few
	// µs per result).
	b.ReportMetric(100*commits.total.Seconds()/wfTotal.Seconds(), "commit_busy_%")
	// The share of the Ps' time (GOMAXPROCS x wall) that no goroutine
	// used: near 0, the run is bound by CPU, and shortening its waits
	// (hand-offs, commits) cannot make it faster; only less CPU per
	// request can. A P held by a goroutine in a system call (fdatasync)
	// counts as used.
	b.ReportMetric(wfPs.idlePct(), "wf_p_idle_%")
	b.ReportMetric(wfPs.gcPct(), "wf_p_gc_%")
	b.ReportMetric(rawPs.idlePct(), "raw_p_idle_%")
	// The CPU (user and system, whole process: server, client, engine,
	// GC) each side spent per request. On 2 cores that both sides keep
	// busy, raw_cpu_us/wf_cpu_us is the best of_raw wf could reach
	// however well it hid its latencies.
	b.ReportMetric(float64(wfCPU.Microseconds())/(n*httpCount), "wf_cpu_us/req")
	b.ReportMetric(float64(rawCPU.Microseconds())/(n*httpCount), "raw_cpu_us/req")
	// What each side allocated per request (whole process, server
	// included; the config is loaded before): what drives the GC's share
	// of the CPU above.
	b.ReportMetric(float64(wfMem.bytes)/(n*httpCount), "wf_B/req")
	b.ReportMetric(float64(wfMem.allocs)/(n*httpCount), "wf_allocs/req")
	b.ReportMetric(float64(rawMem.bytes)/(n*httpCount), "raw_B/req")
	b.ReportMetric(float64(rawMem.allocs)/(n*httpCount), "raw_allocs/req")
	// From the end of a commit to the start of an attempt it made
	// durable (a lower bound: see launchDelays): the hand-over to a
	// worker.
	slices.Sort(launch)
	b.ReportMetric(float64(launch[len(launch)/2])/1e6, "launch_p50_ms")
	b.ReportMetric(float64(launch[len(launch)*9/10])/1e6, "launch_p90_ms")
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procTime is the runtime's account of the Ps' time (GOMAXPROCS x wall
// time): all of it, what no goroutine used, and what the collector used.
type procTime struct{ total, idle, gc float64 }

func readProcTime() procTime {
	s := []metrics.Sample{
		{Name: "/cpu/classes/total:cpu-seconds"},
		{Name: "/cpu/classes/idle:cpu-seconds"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
	}
	metrics.Read(s)
	return procTime{s[0].Value.Float64(), s[1].Value.Float64(), s[2].Value.Float64()}
}

func (p procTime) sub(o procTime) procTime {
	return procTime{p.total - o.total, p.idle - o.idle, p.gc - o.gc}
}

func (p procTime) add(o procTime) procTime {
	return procTime{p.total + o.total, p.idle + o.idle, p.gc + o.gc}
}

func (p procTime) idlePct() float64 { return 100 * p.idle / max(p.total, 1e-9) }
func (p procTime) gcPct() float64   { return 100 * p.gc / max(p.total, 1e-9) }

// heapUse is what the process has allocated: bytes and objects.
type heapUse struct{ bytes, allocs uint64 }

func readHeapUse() heapUse {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapUse{ms.TotalAlloc, ms.Mallocs}
}

func (h heapUse) sub(o heapUse) heapUse { return heapUse{h.bytes - o.bytes, h.allocs - o.allocs} }
func (h heapUse) add(o heapUse) heapUse { return heapUse{h.bytes + o.bytes, h.allocs + o.allocs} }

// rawHTTP makes n GET requests to url from parallelism goroutines with a
// plain client, reading each body to the end.
func rawHTTP(b *testing.B, url string, n, parallelism int) time.Duration {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = parallelism
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range parallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(began)
}

// burstTrace prints, for each burst run, every commit (when, how long, how
// many mutations) and when the attempts began, to stderr: where a late
// retry's time went.
var burstTrace = flag.Bool("burst.trace", false, "BenchmarkHTTPBurst500: print the commit timeline of each run")

const (
	burstCount       = 500
	burstParallelism = 500
	burstBackoff     = 10 * time.Millisecond
)

// BenchmarkHTTPBurst500: 500 http activities at parallelism 500, whose
// first requests all fail at once (503) and are retried after a fixed
// 10 ms, through the whole engine with the real store. Lateness is when a
// retry started minus when it was due (the failed attempt's recorded end
// plus its recorded wait), both from the engine: late_p* use the moment
// the retry's request began (the runner's start, after its start record
// was committed); decided_p99_ms uses the attempt record's start (when the
// core decided to start it). Target: late_p99_ms < 30.
//
// In the same iteration, two references against the same server: raw_*
// is 500 goroutines of a plain Go client doing the same (fail, wait 10 ms
// on a runtime timer, retry), nothing recorded; durable_* is the same
// client keeping wf's durability rule with the cheapest log possible: two
// 300-byte records appended after each failure, and two more before each
// request, which starts only once they are fdatasynced (one writer
// goroutine syncing everything queued at once: ideal group commit, no
// encoding, no index). durable_p99_ms is the floor that disk and CPU set
// for a durable retry at that moment.
func BenchmarkHTTPBurst500(b *testing.B) {
	srv := newLoopback(b, true)
	cfg := loadConfig(b, httpWorkflow("burst", burstCount, srv.srv.URL))
	var (
		commits          timedStore
		late, dec, rawL  []time.Duration
		durL             []time.Duration
		wfConns, rawCons int64
	)
	for i := range b.N {
		sides := []func(){
			func() {
				runner := activity.NewRunner(activity.Options{TempDir: b.TempDir(), Parallelism: burstParallelism})
				starts := &startRecorder{AttemptRunner: runner, at: map[string]time.Time{}}
				var spans []commitSpan
				commits.spans = &spans
				st, _ := runHTTPWorkflow(b, cfg, burstParallelism, starts, &commits)
				if *burstTrace {
					for _, sp := range spans {
						fmt.Fprintf(os.Stderr, "commit at +%v took %v: %d mutations\n", sp.start.Sub(spans[0].start).Round(time.Millisecond/10), sp.took.Round(time.Millisecond/10), sp.mutations)
					}
					var ss []time.Time
					for _, t := range starts.at {
						ss = append(ss, t)
					}
					slices.SortFunc(ss, time.Time.Compare)
					for _, p := range []int{0, 10, 50, 90, 100} {
						fmt.Fprintf(os.Stderr, "runner start p%d at +%v\n", p, ss[(len(ss)-1)*p/100].Sub(spans[0].start).Round(time.Millisecond/10))
					}
				}
				wfConns += srv.reset()
				l, d := burstLateness(b, st, cfg, starts)
				late, dec = append(late, l...), append(dec, d...)
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				_ = runner.Close()
			},
			func() {
				rawL = append(rawL, rawBurst(b, srv.srv.URL, nil)...)
				rawCons += srv.reset()
			},
			func() {
				lg := newGroupLog(b)
				durL = append(durL, rawBurst(b, srv.srv.URL, lg)...)
				srv.reset()
				lg.close()
			},
		}
		// Rotate which side goes first so all see the same load.
		for range i % len(sides) {
			sides = append(sides[1:], sides[0])
		}
		for _, f := range sides {
			f()
		}
	}
	n := float64(b.N)
	pct := func(ls []time.Duration, p int) float64 {
		slices.Sort(ls)
		return float64(ls[(len(ls)-1)*p/100]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(late, 50), "late_p50_ms")
	b.ReportMetric(pct(late, 99), "late_p99_ms")
	b.ReportMetric(pct(late, 100), "late_max_ms")
	b.ReportMetric(pct(dec, 99), "decided_p99_ms")
	b.ReportMetric(pct(rawL, 50), "raw_p50_ms")
	b.ReportMetric(pct(rawL, 99), "raw_p99_ms")
	b.ReportMetric(pct(durL, 50), "durable_p50_ms")
	b.ReportMetric(pct(durL, 99), "durable_p99_ms")
	b.ReportMetric(float64(wfConns)/n, "wf_conns")
	b.ReportMetric(float64(rawCons)/n, "raw_conns")
	b.ReportMetric(float64(commits.n)/n, "commits/op")
	b.ReportMetric(float64(commits.total.Microseconds())/1000/n, "commit_ms/op")
}

// startRecorder notes when each attempt's request began (the runner's own
// Start), by activity and attempt number.
type startRecorder struct {
	AttemptRunner
	mu sync.Mutex
	at map[string]time.Time
}

func (r *startRecorder) Run(ctx context.Context, req activity.Request) activity.Result {
	res := r.AttemptRunner.Run(ctx, req)
	r.mu.Lock()
	r.at[fmt.Sprintf("%s#%d", req.Activity, req.Attempt)] = res.Start
	r.mu.Unlock()
	return res
}

// burstLateness reads every activity's attempt log and returns, for each
// retry, its start (as the runner saw it, and as recorded) minus its due
// time.
func burstLateness(b *testing.B, st *statefile.Store, cfg *config.Config, starts *startRecorder) (late, decided []time.Duration) {
	b.Helper()
	wf := cfg.Workflows[0]
	atts, err := st.Attempts(wf.Name, wf.Key, "")
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i < len(atts); i++ {
		prev, cur := atts[i-1], atts[i]
		if prev.Activity != cur.Activity || !prev.HasWait || cur.Number != prev.Number+1 {
			continue
		}
		due := prev.End.Add(prev.Wait)
		began, ok := starts.at[fmt.Sprintf("%s#%d", cur.Activity, cur.Number)]
		if !ok {
			b.Fatalf("no start seen for %s attempt %d", cur.Activity, cur.Number)
		}
		late = append(late, began.Sub(due))
		decided = append(decided, cur.Start.Sub(due))
	}
	if len(late) != burstCount {
		b.Fatalf("%d retries recorded, want %d", len(late), burstCount)
	}
	return late, decided
}

// rawBurst is the reference for the burst: burstCount goroutines each make
// a request that fails, wait burstBackoff on a runtime timer from the
// moment its response was read, and make the retry; it returns each
// retry's start minus its due time. With lg, each request starts only
// once two records are durable in it, and two are queued after each
// failure (wf records an attempt and its activity at each step).
func rawBurst(b *testing.B, url string, lg *groupLog) []time.Duration {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = burstParallelism
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	late := make([]time.Duration, burstCount)
	get := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	var wg sync.WaitGroup
	for i := range burstCount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("raw-%d", i)
			if lg != nil {
				lg.append(2, true)
			}
			if get(key) != http.StatusServiceUnavailable {
				b.Error("first request did not fail")
			}
			due := time.Now().Add(burstBackoff)
			if lg != nil {
				lg.append(2, false)
			}
			<-time.After(time.Until(due))
			if lg != nil {
				lg.append(2, true)
			}
			late[i] = time.Since(due)
			if get(key) != http.StatusOK {
				b.Error("retry did not succeed")
			}
		}()
	}
	wg.Wait()
	return late
}

// groupLog is the cheapest durable log: records queue in memory and one
// goroutine appends everything queued with one write and one fdatasync,
// then wakes the callers whose records that sync covered.
type groupLog struct {
	f       *os.File
	mu      sync.Mutex
	pending []byte
	waiters []chan struct{}
	wake    chan struct{}
	quit    chan struct{}
	exited  chan struct{}
}

func newGroupLog(b *testing.B) *groupLog {
	f, err := os.Create(b.TempDir() + "/raw.log")
	if err != nil {
		b.Fatal(err)
	}
	l := &groupLog{f: f, wake: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	go l.run(b)
	return l
}

// rawRecord stands for one encoded record (an attempt record is about
// 300 bytes in the store).
var rawRecord = []byte(strings.Repeat("r", 299) + "\n")

// append queues n records; with wait it returns once they are synced.
func (l *groupLog) append(n int, wait bool) {
	var ch chan struct{}
	l.mu.Lock()
	for range n {
		l.pending = append(l.pending, rawRecord...)
	}
	if wait {
		ch = make(chan struct{})
		l.waiters = append(l.waiters, ch)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	if ch != nil {
		<-ch
	}
}

func (l *groupLog) run(b *testing.B) {
	defer close(l.exited)
	for {
		select {
		case <-l.wake:
		case <-l.quit:
			return
		}
		for {
			l.mu.Lock()
			buf, ws := l.pending, l.waiters
			l.pending, l.waiters = nil, nil
			l.mu.Unlock()
			if len(buf) == 0 && len(ws) == 0 {
				break
			}
			if _, err := l.f.Write(buf); err != nil {
				b.Error(err)
			}
			if err := syscall.Fdatasync(int(l.f.Fd())); err != nil {
				b.Error(err)
			}
			for _, w := range ws {
				close(w)
			}
		}
	}
}

func (l *groupLog) close() {
	close(l.quit)
	<-l.exited
	l.f.Close()
}
