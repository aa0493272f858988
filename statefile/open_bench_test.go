package statefile

import (
	"testing"
	"time"
)

// BenchmarkOpenClose100k: a writer's Open and Close of the reopen
// benchmarks' state (100,000 activities, nothing read in between), by
// wall clock and by the process's CPU. On a shared machine the wall time
// is mostly waiting for a CPU; the CPU separates changes to Open that
// the reopen benchmarks' wall times cannot (docs/performance/statefile.md).
func BenchmarkOpenClose100k(b *testing.B) {
	dir := reopenState(b)
	var openWall, openCPU, closeWall, closeCPU time.Duration
	b.ResetTimer()
	for range b.N {
		start, c0 := time.Now(), cpuTime()
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		openWall += time.Since(start)
		openCPU += cpuTime() - c0
		start, c0 = time.Now(), cpuTime()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		closeWall += time.Since(start)
		closeCPU += cpuTime() - c0
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(openWall), "open_ms")
	b.ReportMetric(ms(openCPU), "open_cpu_ms")
	b.ReportMetric(ms(closeWall), "close_ms")
	b.ReportMetric(ms(closeCPU), "close_cpu_ms")
}
