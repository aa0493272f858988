package config

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkRetainedPerActivity: what a loaded configuration keeps live per
// activity, in the shape of the executor's BenchmarkRecover100kDueTimers
// (an exec of literals and one retry block each). Recovering 100,000 such
// activities marks all of it on every collection.
func BenchmarkRetainedPerActivity(b *testing.B) {
	const n = 5000
	var src strings.Builder
	src.WriteString("workflow \"rec\" {\n")
	for i := range n {
		fmt.Fprintf(&src, "  activity \"a%d\" {\n    exec { command = [\"true\"] }\n    retry { maximum_attempts = 5 }\n  }\n", i)
	}
	src.WriteString("}\n")
	files := map[string][]byte{"rec.wf.hcl": []byte(src.String())}
	var kept, objects uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cfg, diags := LoadFiles("rec", files, LoadOptions{})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		cfg.Sources = nil // the caller's bytes
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept += after.HeapAlloc - before.HeapAlloc
		objects += after.HeapObjects - before.HeapObjects
		runtime.KeepAlive(cfg)
	}
	b.ReportMetric(float64(kept)/float64(b.N*n), "live_B/activity")
	b.ReportMetric(float64(objects)/float64(b.N*n), "live_objects/activity")
}
