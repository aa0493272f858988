package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/metrics"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

// runHCL exercises every counter: retries under two error types, a
// non-retryable failure and the skip it causes, a sleep, and a budget that
// refuses with on_exhausted = "fail".
const runHCL = `
retry_budget "api" {
  max_retries = 5
  window      = "1h"
}

retry_budget "tiny" {
  max_retries  = 1
  window       = "1h"
  on_exhausted = "fail"
}

workflow "pay" {
  key = "k1"

  activity "flaky" {
    exec {
      # exit 3 twice, then a typed error, then success.
      script = <<-EOT
        case $WF_ATTEMPT in
          1|2) exit 3 ;;
          3) echo '{"type": "Busy", "message": "try later"}' > "$WF_ERROR_FILE"; exit 1 ;;
        esac
        echo '{"ok": true}'
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "20ms"
      maximum_attempts = 6
      budget           = retry_budget.api
    }
  }

  activity "declined" {
    exec {
      script = "echo '{\"type\": \"CardDeclined\"}' > \"$WF_ERROR_FILE\"; exit 1"
    }
    retry {
      initial_interval     = "20ms"
      maximum_attempts     = 3
      non_retryable_errors = ["CardDeclined"]
    }
  }

  activity "ship" {
    exec { command = ["true"] }
    depends_on = [activity.declined]
  }

  activity "nap" {
    sleep { duration = "30ms" }
  }

  activity "exhaust" {
    exec { command = ["false"] }
    retry {
      backoff          = "fixed"
      initial_interval = "20ms"
      maximum_attempts = 5
      budget           = retry_budget.tiny
    }
  }
}
`

// runOnce runs hcl through the real executor, store and runner with m
// following the bus, and returns the store (closed by the test cleanup).
func runOnce(t *testing.T, hcl string, m *metrics.Metrics) (*config.Config, *statefile.Store) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	st, err := statefile.Open(filepath.Join(dir, ".wf"), statefile.Options{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	runner := activity.NewRunner(activity.Options{TempDir: t.TempDir(), BaseEnv: []string{"PATH=" + os.Getenv("PATH")}})
	t.Cleanup(func() { runner.Close() })
	var insts []core.Instance
	for _, w := range cfg.Workflows {
		insts = append(insts, core.Instance{Workflow: w})
	}
	bus := event.NewBus()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sub := bus.Subscribe()
	go m.Follow(ctx, sub)
	run, err := executor.Start(ctx, executor.Options{Config: cfg, Instances: insts, Store: st, Runner: runner, Bus: bus})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(); err != nil {
		t.Fatal(err)
	}
	bus.Close()
	m.Wait()
	return cfg, st
}

// series is one sample of a scrape: "name{k=v,...}" with sorted labels.
type scrape map[string]float64

func parse(t *testing.T, text []byte) (scrape, map[string]*dto.MetricFamily) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, text)
	}
	out := scrape{}
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			key := func(suffix string, extra ...string) string {
				var ls []string
				for _, l := range m.Label {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				ls = append(ls, extra...)
				sort.Strings(ls)
				return name + suffix + "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key("")] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key("")] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key("_count")] = float64(m.Histogram.GetSampleCount())
				out[key("_sum")] = m.Histogram.GetSampleSum()
				for _, b := range m.Histogram.Bucket {
					out[key("_bucket", fmt.Sprintf("le=%g", b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
			case m.Untyped != nil:
				out[key("")] = m.Untyped.GetValue()
			}
		}
	}
	return out, mfs
}

// key sorts the labels of "name{a=1,b=2}".
func key(k string) string {
	name, rest, _ := strings.Cut(k, "{")
	ls := strings.Split(strings.TrimSuffix(rest, "}"), ",")
	if rest == "}" || rest == "" {
		ls = nil
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

func text(t *testing.T, m *metrics.Metrics) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fromHistory computes, from the attempt log and activity records alone,
// what the counters of one run must say.
func fromHistory(t *testing.T, cfg *config.Config, st *statefile.Store) scrape {
	t.Helper()
	want := scrape{}
	// add takes a key written "name{labels}" in any label order.
	add := func(k string, v float64) { want[key(k)] += v }
	for _, w := range cfg.Workflows {
		acts, err := st.Activities(w.Name, w.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range w.Activities {
			addr := "activity." + a.Name
			lbl := "activity=" + addr + ",workflow=" + w.Name
			for _, o := range []string{"failed", "interrupted", "succeeded"} {
				add("wf_attempts_total{"+lbl+",outcome="+o+"}", 0)
			}
			rec := acts[a.Name]
			if rec == nil {
				t.Fatalf("no record for %s", addr)
			}
			reason := rec.FailReason
			if rec.Status == record.StatusSkipped {
				reason = event.ReasonUpstreamFailed
			}
			add("wf_activities_total{"+lbl+",reason="+reason+",status="+string(rec.Status)+"}", 1)
			atts, err := st.Attempts(w.Name, w.Key, a.Name)
			if err != nil {
				t.Fatal(err)
			}
			var waits, timed int
			var waitSum float64
			for i, att := range atts {
				add("wf_attempts_total{"+lbl+",outcome="+string(att.Outcome)+"}", 1)
				if att.Outcome != record.OutcomeInterrupted {
					timed++
				}
				if att.Error != nil {
					add("wf_retries_total{"+lbl+",error_type="+att.Error.Type+"}", 0)
				}
				if att.Number > 1 {
					add("wf_retries_total{"+lbl+",error_type="+atts[i-1].Error.Type+"}", 1)
				}
				if att.HasWait {
					waits++
					waitSum += att.Wait.Seconds()
				}
			}
			if timed > 0 {
				add("wf_attempt_duration_seconds_count{"+lbl+"}", float64(timed))
			}
			if waits > 0 {
				add("wf_retry_delay_seconds_count{"+lbl+"}", float64(waits))
				add("wf_retry_delay_seconds_sum{"+lbl+"}", waitSum)
			}
		}
	}
	budgets, err := st.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range cfg.Budgets {
		used := 0
		if r := budgets[name]; r != nil {
			used = b.Used(r.Stamps, time.Now())
		}
		add("wf_budget_retries_in_window{budget="+name+"}", float64(used))
		add("wf_budget_usage_ratio{budget="+name+"}", float64(used)/float64(b.MaxRetries))
	}
	return want
}

// TestCountersMatchHistory: at the end of a run, every counter says what the
// attempt log and the activity records say; the gauges are back to zero.
func TestCountersMatchHistory(t *testing.T) {
	m := metrics.New(metrics.Options{})
	cfg, st := runOnce(t, runHCL, m)
	got, _ := parse(t, text(t, m))
	want := fromHistory(t, cfg, st)
	want["wf_budget_exhausted_total{budget=tiny,on_exhausted=fail}"] = 1
	want["wf_pending_timers{}"] = 0
	want["wf_running_attempts{}"] = 0
	// Timer lateness: one observation per retry a timer started, plus the sleep.
	want["wf_timer_lateness_seconds_count{}"] = got["wf_retries_total{activity=activity.flaky,error_type=exit:3,workflow=pay}"] +
		got["wf_retries_total{activity=activity.flaky,error_type=Busy,workflow=pay}"] +
		got["wf_retries_total{activity=activity.exhaust,error_type=exit:1,workflow=pay}"] + 1
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing %s (want %v)", k, v)
			continue
		}
		if math.Abs(g-v) > 1e-9 {
			t.Errorf("%s = %v, history says %v", k, g, v)
		}
	}
	// Every counter of the scrape is accounted for by history.
	for k, v := range got {
		if strings.HasSuffix(strings.SplitN(k, "{", 2)[0], "_total") {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected counter %s = %v", k, v)
			}
		}
	}
	// The figures the scenario is built for, so the test cannot pass on an
	// empty history.
	for k, v := range map[string]float64{
		"wf_retries_total{activity=activity.flaky,error_type=exit:3,workflow=pay}":                          2,
		"wf_retries_total{activity=activity.flaky,error_type=Busy,workflow=pay}":                            1,
		"wf_activities_total{activity=activity.declined,reason=non_retryable,status=failed,workflow=pay}":   1,
		"wf_activities_total{activity=activity.ship,reason=upstream_failed,status=skipped,workflow=pay}":    1,
		"wf_activities_total{activity=activity.exhaust,reason=budget_exhausted,status=failed,workflow=pay}": 1,
		"wf_budget_retries_in_window{budget=api}":                                                           3,
		"wf_budget_usage_ratio{budget=api}":                                                                 0.6,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// TestCollectorMatchesText: the client_golang Collector path and the direct
// text encoder say the same, series for series.
func TestCollectorMatchesText(t *testing.T) {
	m := metrics.New(metrics.Options{})
	runOnce(t, runHCL, m)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var viaCollector bytes.Buffer
	enc := expfmt.NewEncoder(&viaCollector, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	a, afam := parse(t, viaCollector.Bytes())
	b, bfam := parse(t, text(t, m))
	if len(a) == 0 || len(a) != len(b) {
		t.Errorf("collector has %d series, text %d", len(a), len(b))
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			t.Errorf("%s: collector %v, text %v (present %v)", k, v, w, ok)
		}
	}
	for name, f := range afam {
		g := bfam[name]
		if g == nil || g.GetType() != f.GetType() || g.GetHelp() != f.GetHelp() {
			t.Errorf("family %s differs: collector %v %q, text %v", name, f.GetType(), f.GetHelp(), g)
		}
	}
}
