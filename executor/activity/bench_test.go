package activity

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
)

// BenchmarkExecTrue measures one exec attempt of `true` end to end: PATH
// lookup (cached), attempt file paths, process group, capture, output-file
// read and cleanup.
// Compare with BenchmarkRawSpawnTrue for the runner's own overhead.
func BenchmarkExecTrue(b *testing.B) {
	r := NewRunner(Options{BaseEnv: testEnv(), TempDir: b.TempDir()})
	b.Cleanup(func() { _ = r.Close() })
	req := Request{
		Workflow: "bench", Instance: "default", Activity: "true", Attempt: 1,
		IdempotencyKey: "wf1-bench",
		Spec:           &config.Resolved{Exec: &config.ExecSpec{Command: []string{"true"}, Dir: b.TempDir()}},
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := selfCPU()
	for b.Loop() {
		if res := r.Run(ctx, req); res.Failure != nil {
			b.Fatalf("failure %+v", *res.Failure)
		}
	}
	reportSelfCPU(b, cpu0)
}

// selfCPU is the CPU time this process has used (every goroutine, not the
// children): on a shared machine the wall time of a spawn is mostly
// waiting for a CPU, and the runner's own CPU is what it can cut.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportSelfCPU reports the process's CPU per op since cpu0.
func reportSelfCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((selfCPU()-cpu0).Microseconds())/float64(b.N), "cpu_us/op")
}

// BenchmarkRawSpawnTrue is the floor: os/exec running `true` directly.
func BenchmarkRawSpawnTrue(b *testing.B) {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip("true not found")
	}
	b.ReportAllocs()
	cpu0 := selfCPU()
	for b.Loop() {
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
	}
	reportSelfCPU(b, cpu0)
}

// BenchmarkHTTPGet measures one http attempt (GET, 200, an 11-byte JSON
// body) against a loopback server on a kept-alive connection, server
// included; BenchmarkRawHTTPGet is the same request made with a plain
// client, for the runner's own share.
func BenchmarkHTTPGet(b *testing.B) {
	url := benchServer(b)
	r := NewRunner(Options{TempDir: b.TempDir()})
	b.Cleanup(func() { _ = r.Close() })
	req := Request{
		Workflow: "bench", Instance: "default", Activity: "get", Attempt: 1,
		IdempotencyKey: "wf2-0123456789abcdef0123456789abcdef",
		Spec:           &config.Resolved{HTTP: &config.HTTPSpec{URL: url}},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Run(ctx, req); res.Failure != nil {
			b.Fatalf("failure %+v", *res.Failure)
		}
	}
}

func BenchmarkRawHTTPGet(b *testing.B) {
	url := benchServer(b)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	b.Cleanup(client.CloseIdleConnections)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func benchServer(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}
