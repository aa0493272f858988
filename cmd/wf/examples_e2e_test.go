package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// copyExample copies examples/NAME into a fresh directory.
func copyExample(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", filepath.Join("..", "..", "examples", name)+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy example: %v\n%s", err, out)
	}
	return dir
}

// TestExampleBackfillHang runs examples/backfill as its README says, with
// attempt 1 stuck after row 12: it is killed at its heartbeat deadline and
// attempt 2 resumes after row 12.
func TestExampleBackfillHang(t *testing.T) {
	dir := copyExample(t, "backfill")
	p := durStart(t, dir, "-var", "hang_at=12", "-var", "row_seconds=0.02")
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("apply exited %d; stderr:\n%s", code, p.stderr.String())
	}
	if !p.hasEvent("attempt_failed", map[string]any{"attempt": 1, "activity": "activity.copy_rows"}) {
		t.Fatal("attempt 1 did not fail")
	}
	hist := durHistory(t, dir, "backfill/orders-2025", "copy_rows")
	if len(hist) != 2 {
		t.Fatalf("history = %v", hist)
	}
	if e, _ := hist[0]["error"].(map[string]any); e["type"] != "heartbeat_timeout" {
		t.Errorf("attempt 1 error = %v", hist[0]["error"])
	}
	done := p.waitEvent(t, time.Second, "activity_succeeded", func(ev map[string]any) bool {
		return ev["type"] == "attempt_succeeded" && ev["activity"] == "activity.copy_rows"
	})
	out, _ := done["output"].(map[string]any)
	if s, _ := out["stdout"].(string); !strings.Contains(s, `"resumed_after": 12`) || !strings.Contains(s, `"rows": 40`) {
		t.Errorf("attempt 2 printed %q, want it to resume after row 12", s)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestExamplePaymentOutage runs examples/payment with api_outage as its
// README says: the payment_api breaker opens after three failures, the
// retry waits for it without reaching the API, one trial call closes it,
// and the order completes.
func TestExamplePaymentOutage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the payment example builds its API with go")
	}
	dir := copyExample(t, "payment")
	// The API outlives the apply on purpose (it exits when idle): end it.
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "out", "api.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	})
	p := durStart(t, dir, "-var", "api_outage=8s", "-var", "api_port="+strconv.Itoa(freePort(t)), "-var", "order_id=7001")
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("apply exited %d; stderr:\n%s", code, p.stderr.String())
	}
	var seq []string
	for _, ev := range p.snapshot() {
		switch ev["type"] {
		case "circuit_opened", "circuit_half_open", "circuit_closed", "circuit_wait":
			seq = append(seq, ev["type"].(string))
		}
	}
	want := "circuit_opened circuit_wait circuit_half_open circuit_closed"
	if got := strings.Join(seq, " "); got != want {
		t.Errorf("breaker events = %q, want %q", got, want)
	}
	opened := p.waitEvent(t, time.Second, "circuit_opened", isType("circuit_opened"))
	halfOpen := circuitTime(t, opened)
	for _, ev := range p.snapshot() {
		if ev["type"] == "attempt_started" && ev["activity"] == "activity.charge_card" {
			if at := eventTime(t, ev, "@timestamp"); at.After(eventTime(t, opened, "@timestamp")) && at.Before(halfOpen) {
				t.Errorf("charge_card attempt %v started while the breaker was open", ev["attempt"])
			}
		}
	}
}
