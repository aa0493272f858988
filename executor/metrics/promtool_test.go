package metrics_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wf-engine/wf/executor/metrics"
)

// monitoringDir holds the example rules, configuration and dashboard.
var monitoringDir = filepath.Join("..", "..", "examples", "monitoring")

// needTool finds a program of Debian's prometheus package. In CI (CI=true)
// its absence is a failure: .ci/run installs the package. Locally the test
// is skipped, saying how to get it.
func needTool(t *testing.T, name string) string {
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

func promtool(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(needTool(t, "promtool"), args...)
	cmd.Dir = monitoringDir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolCheckMetrics: promtool accepts the scrape (wf_* plus the Go
// runtime and process metrics) and the text file, lint included.
func TestPromtoolCheckMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{})
	runOnce(t, runHCL, m)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	for _, want := range []string{"wf_retries_total{", "wf_budget_usage_ratio{", "go_goroutines ", "process_cpu_seconds_total "} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if out := promtool(t, body, "check", "metrics"); strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics on the scrape:\n%s", out)
	}

	path := filepath.Join(t.TempDir(), "wf.prom")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out := promtool(t, file, "check", "metrics"); strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics on the text file:\n%s", out)
	}
}

// TestAlertRules: the example rules load, their unit tests (firing and not
// firing, for both alerts) pass, and prometheus.yml is a valid
// configuration that loads them.
func TestAlertRules(t *testing.T) {
	promtool(t, nil, "check", "rules", "alerts.yml")
	out := promtool(t, nil, "test", "rules", "alerts_test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
	promtool(t, nil, "check", "config", "prometheus.yml")
}

// TestDashboardUsesOurMetrics: every wf_* name in the Grafana dashboard is
// one wf exports (the end-to-end test runs its queries on a real server).
func TestDashboardUsesOurMetrics(t *testing.T) {
	exprs := dashboardExprs(t)
	if len(exprs) < 6 {
		t.Fatalf("dashboard has %d queries", len(exprs))
	}
	known := " " + metrics.FamilyNames() + " "
	names := regexp.MustCompile(`wf_[a-z_]+`)
	for _, e := range exprs {
		for _, n := range names.FindAllString(e, -1) {
			base := strings.TrimSuffix(n, "_bucket")
			if !strings.Contains(known, " "+base+" ") {
				t.Errorf("dashboard query %q uses %s, which wf does not export", e, n)
			}
		}
	}
}

func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}
