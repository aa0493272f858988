package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// needPromTool finds a program of Debian's prometheus package: a failure in
// CI (CI=true, where .ci/run installs it), a skip with a hint elsewhere.
func needPromTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found: CI needs Debian's prometheus package (.ci/run installs it)", name)
	}
	t.Skipf("%s not found: apt-get install -y prometheus to run this test", name)
	return ""
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// promServer is a real Prometheus server started for one test.
type promServer struct {
	url string
	cmd *exec.Cmd
	log bytes.Buffer
}

// startPrometheus starts Prometheus scraping target every 200ms, with the
// example alert rules loaded, and waits until it is ready.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin := needPromTool(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join("..", "..", "examples", "monitoring", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 200ms
  scrape_timeout: 200ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: wf
    static_configs:
      - targets: [%q]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := &promServer{url: "http://" + addr}
	p.cmd = exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Stop it by its PID: SIGTERM, then SIGKILL if it lingers.
		pid := p.cmd.Process.Pid
		syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			syscall.Kill(pid, syscall.SIGKILL)
			<-exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited: %s", p.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 60s: %s", p.log.String())
		}
	}
}

// query runs an instant query and returns its vector as "labels" -> value,
// labels written k=v sorted and joined by commas (__name__ left out).
func (p *promServer) query(t *testing.T, q string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: %v %s %s", q, err, body.Error, b)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		var ls []string
		for k, v := range r.Metric {
			if k != "__name__" && k != "job" && k != "instance" {
				ls = append(ls, k+"="+v)
			}
		}
		sort.Strings(ls)
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, r.Value)
		}
		out[strings.Join(ls, ",")] = v
	}
	return out
}

// waitQuery polls q until cond holds of its result. Prometheus scrapes on
// its own schedule: the test waits for the values, it does not guess when.
func (p *promServer) waitQuery(t *testing.T, q string, what string, cond func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := p.query(t, q)
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus never had %s: %s = %v\nlog: %s", what, q, got, p.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const metricsE2EHCL = `
retry_budget "api" {
  max_retries = 5
  window      = "1h"
}

workflow "e2e" {
  key = "k1"

  # exit 3 three times, then a typed error, then success: 4 retries, 80 %
  # of the budget (a budget_high warning).
  activity "flaky" {
    exec {
      script = <<-EOT
        case $WF_ATTEMPT in
          1|2|3) exit 3 ;;
          4) echo '{"type": "Busy"}' > "$WF_ERROR_FILE"; exit 1 ;;
        esac
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 8
      budget           = retry_budget.api
    }
  }

  # Keeps the apply (and its metrics endpoint) alive until the test has
  # seen what it needs in Prometheus.
  activity "gate" {
    exec {
      script = "i=0; while [ ! -f release ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"
    }
    timeout    = "2m"
    depends_on = [activity.flaky]
  }
}
`

// TestMetricsEndToEndPrometheus: a real Prometheus scrapes a real wf apply
// -metrics-addr of a retrying workflow; what its query API returns for
// wf_retries_total, wf_attempts_total and wf_budget_usage_ratio equals what
// wf history records, and so does the -metrics-file written at exit. The
// example dashboard's queries and alert rules run on the same server.
func TestMetricsEndToEndPrometheus(t *testing.T) {
	needPromTool(t, "prometheus")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(metricsE2EHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	wfAddr := freeAddr(t)
	prom := startPrometheus(t, wfAddr)
	file := filepath.Join(t.TempDir(), "wf.prom")
	p := durStart(t, dir, "-metrics-addr", wfAddr, "-metrics-file", file)

	p.waitEvent(t, 60*time.Second, "the gate to start", func(ev map[string]any) bool {
		return ev["type"] == "attempt_started" && ev["activity"] == "activity.gate"
	})
	// The run's own events say what the counters must reach.
	p.mu.Lock()
	var retries, high int
	for _, ev := range p.events {
		if ev["activity"] == "activity.flaky" && ev["type"] == "attempt_started" && ev["attempt"].(float64) > 1 {
			retries++
		}
		if ev["type"] == "budget_high" {
			high++
		}
	}
	p.mu.Unlock()
	if retries != 4 || high != 1 {
		t.Fatalf("%d retries and %d budget_high events in the run, want 4 and 1", retries, high)
	}

	const flaky = `{workflow="e2e",activity="activity.flaky"}`
	gotRetries := prom.waitQuery(t, "wf_retries_total"+flaky, "the retries", func(m map[string]float64) bool {
		var sum float64
		for _, v := range m {
			sum += v
		}
		return sum == float64(retries)
	})
	// At least two scrapes of the final values, so rate() has data.
	prom.waitQuery(t, `count_over_time(wf_retries_total{activity="activity.flaky",error_type="exit:3"}[1m])`, "two scrapes",
		func(m map[string]float64) bool { return len(m) == 1 && m[firstKey(m)] >= 2 })
	gotAttempts := prom.query(t, "wf_attempts_total"+flaky)
	gotRatio := prom.query(t, `wf_budget_usage_ratio{budget="api"}`)
	gotRunning := prom.query(t, "wf_running_attempts")

	// Every dashboard query runs; the rules are loaded.
	for _, q := range dashboardQueries(t) {
		prom.query(t, strings.ReplaceAll(q, "$workflow", ".*"))
	}
	var rules struct {
		Data struct {
			Groups []struct{ Rules []struct{ Name string } }
		}
	}
	getJSON(t, prom.url+"/api/v1/rules", &rules)
	if len(rules.Data.Groups) != 1 || len(rules.Data.Groups[0].Rules) != 2 {
		t.Errorf("rules loaded: %+v", rules.Data)
	}

	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("wf apply exit %d: %s", code, p.stderr.String())
	}

	// What history records.
	hist := durHistory(t, dir, "e2e/k1", "flaky")
	wantRetries := map[string]float64{}
	wantAttempts := map[string]float64{"outcome=failed": 0, "outcome=interrupted": 0, "outcome=succeeded": 0}
	for i, row := range hist {
		wantAttempts["outcome="+row["outcome"].(string)]++
		if row["attempt"].(float64) > 1 {
			prev := hist[i-1]["error"].(map[string]any)["type"].(string)
			wantRetries["error_type="+prev]++
		}
	}
	wantLabels := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range m {
			out["activity=activity.flaky,"+k+",workflow=e2e"] = v
		}
		return out
	}
	t.Logf("Prometheus: retries %v, attempts %v, budget ratio %v", gotRetries, gotAttempts, gotRatio)
	same(t, "wf_retries_total", gotRetries, wantLabels(wantRetries))
	same(t, "wf_attempts_total", gotAttempts, wantLabels(wantAttempts))
	// The budget's window is 1h: every grant of this run is still in it.
	same(t, "wf_budget_usage_ratio", gotRatio, map[string]float64{"budget=api": float64(len(hist)-1) / 5})
	same(t, "wf_running_attempts while the gate ran", gotRunning, map[string]float64{"": 1})

	// The text file written at exit: the whole run, gate included.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("metrics file: %v\n%s", err, b)
	}
	fileValue := func(name string, labels map[string]string) float64 {
		for _, m := range mfs[name].GetMetric() {
			ok := true
			for _, l := range m.Label {
				if want, has := labels[l.GetName()]; has && want != l.GetValue() {
					ok = false
				}
			}
			if ok {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
		t.Fatalf("metrics file lacks %s %v", name, labels)
		return 0
	}
	if v := fileValue("wf_attempts_total", map[string]string{"activity": "activity.gate", "outcome": "succeeded"}); v != 1 {
		t.Errorf("file: gate attempts %v", v)
	}
	for k, v := range wantRetries {
		if got := fileValue("wf_retries_total", map[string]string{"activity": "activity.flaky", "error_type": strings.TrimPrefix(k, "error_type=")}); got != v {
			t.Errorf("file: retries %s = %v, history %v", k, got, v)
		}
	}
	if v := fileValue("wf_running_attempts", nil); v != 0 {
		t.Errorf("file: running attempts at exit %v", v)
	}
}

func firstKey(m map[string]float64) string {
	for k := range m {
		return k
	}
	return ""
}

func same(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: Prometheus has %v, history says %v", what, got, want)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// dashboardQueries are the PromQL queries of the example Grafana dashboard.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct{ Targets []struct{ Expr string } }
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatal("no queries in the dashboard")
	}
	return out
}
