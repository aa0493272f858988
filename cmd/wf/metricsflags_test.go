package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const metricsFlagsHCL = `
workflow "m" {
  activity "a" {
    exec {
      script = "[ $WF_ATTEMPT -ge 2 ] || exit 4"
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 3
    }
  }
}
`

// TestApplyMetricsFlagErrors: a taken -metrics-addr or an unwritable
// -metrics-file fails wf apply before it plans, creating no state.
func TestApplyMetricsFlagErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"taken port", []string{"-metrics-addr", taken.Addr().String()}, "-metrics-addr: serve metrics: listen tcp " + taken.Addr().String() + ": bind: address already in use"},
		{"missing directory", []string{"-metrics-file", filepath.Join(t.TempDir(), "no", "wf.prom")}, "-metrics-file: write metrics file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeConfig(t, map[string]string{"main.wf.hcl": metricsFlagsHCL})
			r := wf(t, append(append([]string{"apply", "-auto-approve"}, tt.args...), dir)...)
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q, want %q", r.code, r.stderr, tt.want)
			}
			if strings.Contains(r.stdout, "Plan:") {
				t.Errorf("planned anyway:\n%s", r.stdout)
			}
			if _, err := os.Stat(filepath.Join(dir, ".wf")); !os.IsNotExist(err) {
				t.Errorf("state created: %v", err)
			}
		})
	}
}

// TestApplyMetricsFile: the file written at exit holds the run's counters
// and the plain output warns when the budget crosses 80 %.
func TestApplyMetricsFile(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": `
retry_budget "api" {
  max_retries = 1
  window      = "1h"
}
` + strings.Replace(metricsFlagsHCL, `maximum_attempts = 3`, "maximum_attempts = 3\n      budget = retry_budget.api", 1)})
	file := filepath.Join(t.TempDir(), "wf.prom")
	r := wf(t, "apply", "-auto-approve", "-metrics-file", file, dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "warning: retry budget api is at 1/1 retries per 1h\n") {
		t.Errorf("no budget warning:\n%s", r.stdout)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{
		`wf_attempts_total{workflow="m",activity="activity.a",outcome="failed"} 1`:               false,
		`wf_attempts_total{workflow="m",activity="activity.a",outcome="succeeded"} 1`:            false,
		`wf_retries_total{workflow="m",activity="activity.a",error_type="exit:4"} 1`:             false,
		`wf_activities_total{workflow="m",activity="activity.a",status="succeeded",reason=""} 1`: false,
		`wf_budget_usage_ratio{budget="api"} 1`:                                                  false,
		`wf_running_attempts 0`:                                                                  false,
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, ok := want[sc.Text()]; ok {
			want[sc.Text()] = true
		}
	}
	for line, seen := range want {
		if !seen {
			t.Errorf("metrics file lacks %s", line)
		}
	}
}
