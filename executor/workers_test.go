package executor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/event"
)

// goroutineRunner records which goroutines ran attempts and how many ran
// at once.
type goroutineRunner struct {
	mu           sync.Mutex
	ids          map[uint64]int
	running, max int
}

func (g *goroutineRunner) Run(ctx context.Context, req activity.Request) activity.Result {
	g.mu.Lock()
	g.ids[goroutineID()]++
	g.running++
	g.max = max(g.max, g.running)
	g.mu.Unlock()
	// Long enough for the attempts of one step to overlap.
	time.Sleep(200 * time.Microsecond)
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	now := time.Now()
	return activity.Result{Start: now, End: now, Outputs: []byte(`{}`)}
}

// goroutineID parses the calling goroutine's id from its stack header
// ("goroutine 42 [running]:"); tests only.
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// Attempts run on a small set of reused worker goroutines, never more at
// once than Parallelism, and the workers are gone once the run is over.
func TestWorkersAreReusedAndExit(t *testing.T) {
	const n, parallelism = 300, 4
	var src strings.Builder
	src.WriteString("workflow \"many\" {\n")
	for i := range n {
		fmt.Fprintf(&src, "  activity \"a%d\" {\n    exec { command = [\"true\"] }\n  }\n", i)
	}
	src.WriteString("}\n")
	cfg := loadConfig(t, src.String())
	before := runtime.NumGoroutine()

	runner := &goroutineRunner{ids: map[uint64]int{}}
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: newMemStore(), Runner: runner, Parallelism: parallelism})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait()
	if err != nil || out.Status != event.StatusSucceeded || out.Summary.Succeeded != n {
		t.Fatalf("run: %+v %v", out, err)
	}
	runner.mu.Lock()
	defer runner.mu.Unlock()
	if runner.max > parallelism {
		t.Errorf("%d attempts ran at once, want at most %d", runner.max, parallelism)
	}
	// A worker is started only when none is idle, so a few more than
	// Parallelism can exist (one may be between two attempts); one per
	// attempt would be n.
	if len(runner.ids) > 2*parallelism {
		t.Errorf("attempts ran on %d goroutines, want at most %d (workers not reused)", len(runner.ids), 2*parallelism)
	}
	waitFor(t, "workers to exit", func() bool { return runtime.NumGoroutine() <= before })
}

// procsRunner records GOMAXPROCS while attempts run.
type procsRunner struct {
	mu   sync.Mutex
	seen map[int]int
}

func (p *procsRunner) Run(ctx context.Context, req activity.Request) activity.Result {
	p.mu.Lock()
	p.seen[runtime.GOMAXPROCS(0)]++
	p.mu.Unlock()
	now := time.Now()
	return activity.Result{Start: now, End: now, Outputs: []byte(`{}`)}
}

// While a run starts exec attempts it has one more P per CPU (at most
// Parallelism more), since a fork holds its P until the child has exec'd;
// once the run is over GOMAXPROCS is what it was.
func TestExecRunReservesProcsForForks(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: the executor keeps it")
	}
	base := runtime.GOMAXPROCS(0)
	for _, parallelism := range []int{1, 4} {
		var src strings.Builder
		src.WriteString("workflow \"many\" {\n")
		for i := range 20 {
			fmt.Fprintf(&src, "  activity \"a%d\" {\n    exec { command = [\"true\"] }\n  }\n", i)
		}
		src.WriteString("}\n")
		cfg := loadConfig(t, src.String())
		runner := &procsRunner{seen: map[int]int{}}
		run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: newMemStore(), Runner: runner, Parallelism: parallelism})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := run.Wait(); err != nil || out.Status != event.StatusSucceeded {
			t.Fatalf("run: %+v %v", out, err)
		}
		want := base + min(base, parallelism)
		if len(runner.seen) != 1 || runner.seen[want] != 20 {
			t.Errorf("parallelism %d: GOMAXPROCS during the attempts %v, want %d for all 20 (base %d)", parallelism, runner.seen, want, base)
		}
		if got := runtime.GOMAXPROCS(0); got != base {
			t.Errorf("parallelism %d: GOMAXPROCS after the run %d, want %d again", parallelism, got, base)
		}
	}
}

// Reservations of concurrent runs add up to one: the Ps go back when the
// last run releases its reservation, and a release counts only once.
func TestForkProcsReservationsNest(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: the executor keeps it")
	}
	base := runtime.GOMAXPROCS(0)
	raised := base + min(base, 8)
	first := reserveForkProcs(8)
	second := reserveForkProcs(2)
	if got := runtime.GOMAXPROCS(0); got != raised {
		t.Fatalf("GOMAXPROCS with two reservations %d, want %d", got, raised)
	}
	first()
	first()
	if got := runtime.GOMAXPROCS(0); got != raised {
		t.Errorf("GOMAXPROCS after one of two releases (twice) %d, want %d still", got, raised)
	}
	second()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Errorf("GOMAXPROCS after both releases %d, want %d", got, base)
	}
}
