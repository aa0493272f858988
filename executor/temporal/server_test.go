package temporal_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	wftemporal "github.com/wf-engine/wf/executor/temporal"
	"github.com/wf-engine/wf/executor/temporal/temporaltest"
	"github.com/wf-engine/wf/statefile/record"
)

var recordHistories = flag.Bool("record-histories", false, "run the replay scenarios on a dev server and rewrite testdata/replay/")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	temporaltest.StopShared()
	os.Exit(code)
}

// replayScenarios are recorded on a real server (-record-histories) and
// replayed by TestReplay: together they cover attempts that fail and
// succeed, the one retry timer, jitter, a durable sleep, a skipped
// activity, a shared budget's wait and continue-as-new.
var replayScenarios = []struct {
	name  string
	hcl   string
	limit int // HistoryLimit
}{
	{
		name: "retries",
		hcl: `
workflow "replay" {
  key = "retries"
  activity "flaky" {
    exec { script = "test -e flaky.ok || { touch flaky.ok; exit 3; }" }
    retry {
      backoff = "fixed"
      initial_interval = "50ms"
      maximum_attempts = 3
    }
  }
  activity "jittered" {
    exec { script = "test -e jit.ok || { touch jit.ok; exit 4; }" }
    retry {
      initial_interval = "40ms"
      maximum_attempts = 3
      jitter = "full"
    }
  }
  activity "nap" {
    sleep { duration = "100ms" }
    depends_on = [activity.flaky, activity.jittered]
  }
  activity "broken" {
    exec { command = ["sh", "-c", "exit 9"] }
    depends_on = [activity.nap]
  }
  activity "never" {
    exec { command = ["true"] }
    depends_on = [activity.broken]
  }
}
`,
	},
	{
		name: "budget",
		hcl: `
retry_budget "replay_budget" {
  max_retries  = 1
  window       = "300ms"
  on_exhausted = "wait"
}
workflow "replay" {
  key = "budget"
  activity "limited" {
    exec { script = "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; test $n -ge 2" }
    retry {
      backoff = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 5
      budget = retry_budget.replay_budget
    }
  }
}
`,
	},
	{
		name:  "continue-as-new",
		limit: 40,
		hcl: `
workflow "replay" {
  key = "can"
  activity "loop" {
    exec { script = "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; test $n -ge 7" }
    retry {
      backoff = "fixed"
      initial_interval = "20ms"
      maximum_attempts = 12
    }
  }
}
`,
	},
}

// serverRun applies one scenario on the dev server with an in-process
// worker and returns the final state and the IDs of every run.
func serverRun(t *testing.T, srv *temporaltest.Server, hcl string, limit int) (*wftemporal.State, []string, client.Client) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := wftemporal.Dial(ctx, wftemporal.ClientOptions{Address: srv.Address})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	queue := fmt.Sprintf("replay-%d", time.Now().UnixNano())
	runner := activity.NewRunner(activity.Options{BaseEnv: []string{"PATH=" + os.Getenv("PATH")}, TempDir: t.TempDir()})
	defer runner.Close()
	w := wftemporal.NewWorker(cl.SDK, &wftemporal.Attempts{Runner: runner, Dir: dir}, wftemporal.WorkerOptions{TaskQueue: queue})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	src, err := wftemporal.ReadSources(dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, diags := src.Load()
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	wf := cfg.Workflows[0]
	in := wftemporal.Input{Workflow: wf.Name, Key: wf.Key, StateID: wftemporal.NewStateID(), HistoryLimit: limit, SharedBudgets: true}
	in.SetSources(src)
	// A previous recording or test run may have left the instance.
	if run, _ := cl.Describe(ctx, wf.Name, wf.Key); run != nil && !run.Removed {
		if err := cl.Remove(ctx, wf.Name, wf.Key); err != nil {
			t.Fatal(err)
		}
	}
	first, err := cl.Start(ctx, in, queue)
	if err != nil {
		t.Fatal(err)
	}
	var st wftemporal.State
	if err := cl.SDK.GetWorkflow(ctx, first.WorkflowID, first.RunID).Get(ctx, &st); err != nil {
		t.Fatalf("result: %v", err)
	}
	// The chain of runs, first to last.
	runs := []string{first.RunID}
	for {
		next := ""
		iter := cl.SDK.GetWorkflowHistory(ctx, first.WorkflowID, runs[len(runs)-1], false, 0)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		if next == "" {
			break
		}
		runs = append(runs, next)
	}
	return &st, runs, cl.SDK
}

func history(t *testing.T, c client.Client, id, runID string) *historypb.History {
	t.Helper()
	h := &historypb.History{}
	iter := c.GetWorkflowHistory(context.Background(), id, runID, false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}

// TestServerContinueAsNew runs a retry loop on a real server with a low
// history limit: the apply continues as new several times and still ends
// with every attempt, in order, and one idempotency key.
func TestServerContinueAsNew(t *testing.T) {
	srv := temporaltest.Need(t)
	sc := replayScenarios[2]
	st, runs, _ := serverRun(t, srv, sc.hcl, sc.limit)
	if len(runs) < 2 || st.Runs != len(runs) {
		t.Fatalf("the apply took %d runs (state says %d); want it continued as new", len(runs), st.Runs)
	}
	a := st.Activities["loop"]
	if a.Status != record.StatusSucceeded || a.Attempts != 8 {
		t.Fatalf("activity.loop = %s after %d attempts, want succeeded after 8", a.Status, a.Attempts)
	}
	if len(st.Attempts) != 8 {
		t.Fatalf("attempt log has %d entries, want 8", len(st.Attempts))
	}
	for i, att := range st.Attempts {
		if att.Number != i+1 || att.IdempotencyKey != a.IdempotencyKey {
			t.Errorf("attempt %d = #%d key %s", i+1, att.Number, att.IdempotencyKey)
		}
		if i < 7 && (!att.HasWait || att.Wait != 20*time.Millisecond) {
			t.Errorf("attempt %d wait = %v %v, want 20ms", i+1, att.HasWait, att.Wait)
		}
	}
	if st.Summary == nil || st.Summary.Attempts != 8 || st.Summary.Retries != 7 {
		t.Errorf("summary = %+v, want 8 attempts and 7 retries across the runs", st.Summary)
	}
}

// TestServerSharedBudgetWait: a retry that the shared budget refuses
// waits for the window to free, then runs.
func TestServerSharedBudgetWait(t *testing.T) {
	srv := temporaltest.Need(t)
	st, _, _ := serverRun(t, srv, replayScenarios[1].hcl, 0)
	a := st.Activities["limited"]
	if a.Status != record.StatusSucceeded || a.Attempts != 3 {
		t.Fatalf("activity.limited = %s after %d attempts, want succeeded after 3", a.Status, a.Attempts)
	}
	// One retry per 300ms window: each retry's token is taken after the
	// attempt before it failed, at most 10ms before the retry starts, so
	// retries start at least a window apart, whatever the load (the budget
	// keeps its window on the server's clock, like the instance's; 100ms
	// of slack for the workflow tasks between a grant and the start it
	// allows). Without the budget they would start 10ms after each failure.
	const window, slack = 300 * time.Millisecond, 100 * time.Millisecond
	for k := 1; k+1 < len(st.Attempts); k++ {
		prev, next := st.Attempts[k], st.Attempts[k+1]
		if gap := next.Start.Sub(prev.Start); gap < window-slack {
			t.Errorf("attempt %d started %s after attempt %d; the budget allows one retry per %s", k+2, gap, k+1, window)
		}
	}
}

// TestReplay replays histories recorded on a real server through today's
// interpreter: any change that would make a running instance take another
// path (non-determinism) fails here.
func TestReplay(t *testing.T) {
	if *recordHistories {
		recordAll(t)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "replay", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories in testdata/replay (run go test -run TestReplay -record-histories with the Temporal CLI installed): %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			wftemporal.RegisterWorkflow(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(wftemporal.QuietLogger(), f); err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
}

func recordAll(t *testing.T) {
	srv := temporaltest.Need(t)
	dir := filepath.Join("testdata", "replay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sc := range replayScenarios {
		_, runs, c := serverRun(t, srv, sc.hcl, sc.limit)
		for i, runID := range runs {
			h := history(t, c, workflowID(sc.hcl), runID)
			b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s-run%d.json", sc.name, i+1)
			if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func workflowID(hcl string) string {
	key := hcl[strings.Index(hcl, `key = "`)+len(`key = "`):]
	key = key[:strings.Index(key, `"`)]
	return wftemporal.WorkflowID("replay", key)
}
