package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The scale benchmarks run wf on one workflow of N activities, in two
// shapes. "blocks": N separate activity blocks, a binary tree of
// dependencies, half through a data reference (activity.PARENT.exit_code)
// and half through depends_on, each with a named retry policy; one file
// holds at most 400,000 tokens (config.MaxTokens), about 10,000 such blocks.
// "fanout": one activity with for_each over N keys read from a
// *.auto.wfvars.json file (an HCL for expression over 100,000 elements
// exceeds config.BudgetSteps), between an upstream it reads a result of and
// a downstream that depends on all of it. The figures are whole processes
// of the real binary (wall time and the child's peak RSS) and the state's
// size on disk.
//
//	go test ./cmd/wf -run '^$' -bench 'Scale' -benchtime 1x -count 3

// scaleShape writes a workflow of n activities of the shape to dir.
func scaleShape(tb testing.TB, dir, shape string, n int) {
	tb.Helper()
	switch shape {
	case "blocks":
		scaleWorkflow(tb, dir, n)
	case "fanout":
		scaleFanOut(tb, dir, n)
	default:
		tb.Fatalf("unknown shape %q", shape)
	}
}

// scaleWorkflow writes a workflow of n activity blocks to dir/main.wf.hcl.
func scaleWorkflow(tb testing.TB, dir string, n int) {
	tb.Helper()
	var b strings.Builder
	b.WriteString("retry_policy \"std\" {\n  initial_interval = \"1s\"\n  maximum_attempts = 3\n}\n\nworkflow \"big\" {\n")
	for i := range n {
		fmt.Fprintf(&b, "  activity \"a%06d\" {\n", i)
		parent := (i - 1) / 2
		switch {
		case i > 0 && i%2 == 1:
			fmt.Fprintf(&b, "    exec { command = [\"true\", \"%d\", tostring(activity.a%06d.exit_code)] }\n", i, parent)
		case i > 0:
			fmt.Fprintf(&b, "    exec { command = [\"true\", \"%d\"] }\n    depends_on = [activity.a%06d]\n", i, parent)
		default:
			fmt.Fprintf(&b, "    exec { command = [\"true\", \"%d\"] }\n", i)
		}
		b.WriteString("    retry = retry_policy.std\n  }\n")
	}
	b.WriteString("}\n")
	writeScaleFile(tb, filepath.Join(dir, "main.wf.hcl"), b.String())
}

const scaleFanOutConfig = `variable "keys" {
  type = set(string)
}

retry_policy "std" {
  initial_interval = "1s"
  maximum_attempts = 3
}

workflow "fan" {
  activity "up" {
    exec { command = ["echo", "{\"flag\": \"x\"}"] }
  }
  activity "work" {
    for_each = var.keys
    exec { command = ["true", each.key, activity.up.result.flag] }
    retry    = retry_policy.std
  }
  activity "after" {
    exec { command = ["true"] }
    depends_on = [activity.work]
  }
}
`

// scaleFanOut writes the fan-out workflow of n elements (n+2 activities)
// to dir, its keys in dir/keys.auto.wfvars.json.
func scaleFanOut(tb testing.TB, dir string, n int) {
	tb.Helper()
	writeScaleFile(tb, filepath.Join(dir, "main.wf.hcl"), scaleFanOutConfig)
	var b strings.Builder
	b.WriteString(`{"keys": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%06d"`, i)
	}
	b.WriteString("]}\n")
	writeScaleFile(tb, filepath.Join(dir, "keys.auto.wfvars.json"), b.String())
}

func writeScaleFile(tb testing.TB, path, s string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// scaleSizes are the workflow sizes of the scale benchmarks; SCALE_N (a
// comma-separated list) narrows them.
func scaleSizes(b *testing.B) []int {
	sizes := []int{100, 1000, 10000, 100000}
	if s := os.Getenv("SCALE_N"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("SCALE_N: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	return sizes
}

// BenchmarkScaleInProcess runs `wf CMD` in this process so that
// -cpuprofile and -memprofile see config, planner and core (SCALE_CMD:
// validate or plan; default plan; SCALE_SHAPE: blocks or fanout, default
// fanout).
func BenchmarkScaleInProcess(b *testing.B) {
	cmd := os.Getenv("SCALE_CMD")
	if cmd == "" {
		cmd = "plan"
	}
	shape := os.Getenv("SCALE_SHAPE")
	if shape == "" {
		shape = "fanout"
	}
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			scaleShape(b, dir, shape, n)
			for b.Loop() {
				if code := run(context.Background(), []string{cmd, "-no-color", dir}, strings.NewReader(""), io.Discard, io.Discard, os.Environ()); code != 0 {
					b.Fatalf("wf %s: exit %d", cmd, code)
				}
			}
		})
	}
}
