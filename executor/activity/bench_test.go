package activity

import (
	"context"
	"os/exec"
	"testing"

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
	for b.Loop() {
		if res := r.Run(ctx, req); res.Failure != nil {
			b.Fatalf("failure %+v", *res.Failure)
		}
	}
}

// BenchmarkRawSpawnTrue is the floor: os/exec running `true` directly.
func BenchmarkRawSpawnTrue(b *testing.B) {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip("true not found")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
	}
}
