package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestTemporalWorkerMetrics: a wf worker with -metrics-addr and
// -metrics-file runs a retrying workflow and a heartbeating one. Its
// scrape passes promtool check metrics (lint included), holds the Go
// runtime and process metrics, and its counters equal what the instance's
// history on Temporal records: attempts by outcome, retries by the error
// type they retry, attempt durations, heartbeats, no attempt running. The
// file written when the worker stops says the same.
func TestTemporalWorkerMetrics(t *testing.T) {
	promtoolBin := needPromTool(t, "promtool")
	e := newTEnv(t, `
workflow "wm" {
  key = "k"
  activity "flaky" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", SUCCEED_ON = "4" }
    }
    retry {
      backoff          = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 5
    }
  }
  activity "beat" {
    exec {
      command = ["sh", "-c", "for i in 1 2 3; do echo $i > \"$WF_HEARTBEAT_FILE\"; sleep 0.3; done"]
    }
    heartbeat_timeout = "10s"
  }
}
`)
	addr := freeAddr(t)
	file := filepath.Join(t.TempDir(), "worker.prom")
	worker, exited := e.workerWith("-metrics-addr", addr, "-metrics-file", file)
	p := e.apply()
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d; stderr:\n%s", code, p.stderr.String())
	}

	// What Temporal's history of the instance records.
	want := map[string]float64{
		`wf_attempts_total{activity=activity.flaky,outcome=failed,workflow=wm}`:      0,
		`wf_attempts_total{activity=activity.flaky,outcome=succeeded,workflow=wm}`:   0,
		`wf_attempts_total{activity=activity.flaky,outcome=interrupted,workflow=wm}`: 0,
		`wf_attempts_total{activity=activity.beat,outcome=succeeded,workflow=wm}`:    0,
		`wf_attempt_duration_seconds_count{activity=activity.flaky,workflow=wm}`:     0,
		`wf_running_attempts`: 0,
	}
	var prevErr string
	for _, h := range e.history("wm/k") {
		want[fmt.Sprintf("wf_attempts_total{activity=%s,outcome=%s,workflow=wm}", h.Activity, h.Outcome)]++
		if h.Activity != "activity.flaky" {
			continue
		}
		want["wf_attempt_duration_seconds_count{activity=activity.flaky,workflow=wm}"]++
		if h.Attempt > 1 {
			want[fmt.Sprintf("wf_retries_total{activity=activity.flaky,error_type=%s,workflow=wm}", prevErr)]++
		}
		prevErr = ""
		if h.Error != nil {
			prevErr = h.Error.Type
		}
	}
	if want["wf_attempts_total{activity=activity.flaky,outcome=failed,workflow=wm}"] != 3 ||
		want["wf_retries_total{activity=activity.flaky,error_type=exit:3,workflow=wm}"] != 3 {
		t.Fatalf("history: %v; want 3 failed attempts with exit:3, then a success", want)
	}

	// The worker's scrape catches up with the history within moments.
	var body []byte
	var got map[string]float64
	deadline := time.Now().Add(15 * time.Second)
	for {
		body = scrapeWorker(t, addr)
		got = parseSamples(t, body)
		if sameSamples(got, want) == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if diff := sameSamples(got, want); diff != "" {
		t.Errorf("worker scrape differs from history:\n%s", diff)
	}
	if got["wf_heartbeats_total{activity=activity.beat,workflow=wm}"] < 1 {
		t.Errorf("wf_heartbeats_total of activity.beat = %v, want at least 1", got["wf_heartbeats_total{activity=activity.beat,workflow=wm}"])
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if _, ok := got[name]; !ok {
			t.Errorf("the worker's scrape has no %s", name)
		}
	}
	check := exec.Command(promtoolBin, "check", "metrics")
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	// Stopped, the worker writes the file a last time.
	if err := worker.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30s of SIGTERM")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameSamples(parseSamples(t, b), want); diff != "" {
		t.Errorf("-metrics-file differs from history:\n%s", diff)
	}
}

func scrapeWorker(t *testing.T, addr string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape the worker: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape the worker: %s, %v", resp.Status, err)
	}
	return b
}

// parseSamples reads a scrape as name{label=value,...} -> value, labels
// sorted; histograms give their _count and _sum.
func parseSamples(t *testing.T, b []byte) map[string]float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, b)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := func(n string) string {
				if len(ls) == 0 {
					return n
				}
				return n + "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key(name)] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key(name)] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key(name+"_count")] = float64(m.Histogram.GetSampleCount())
				out[key(name+"_sum")] = m.Histogram.GetSampleSum()
			case m.Untyped != nil:
				out[key(name)] = m.Untyped.GetValue()
			}
		}
	}
	return out
}

// sameSamples lists the samples of want that got lacks or differs in.
func sameSamples(got, want map[string]float64) string {
	var diff []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			diff = append(diff, fmt.Sprintf("  %s = %v (present %v), want %v", k, g, ok, v))
		}
	}
	sort.Strings(diff)
	return strings.Join(diff, "\n")
}
