package activity

import (
	"context"
	"os"
	"strings"
	"testing"
)

// The path of a kernel without pidfds (a goroutine waits and signals the
// poll through a pipe) must behave as the pidfd path does; this kernel has
// pidfds, so the tests that exercise waiting run again without them.
func TestExecWithoutPidfd(t *testing.T) {
	usePidfd = false
	t.Cleanup(func() { usePidfd = true })
	t.Run("outputs", TestExecOutputs)
	t.Run("output cap", TestExecOutputCap)
	t.Run("timeout", TestExecTimeoutKillsProcessGroup)
	t.Run("cancel", TestExecCancelInterrupts)
	t.Run("cancelled before start", TestExecCancelledBeforeStart)
	t.Run("lingering child", TestExecLingeringChildDoesNotHang)
	t.Run("large output", TestExecLargeOutputReadWhole)
	t.Run("no fd left", TestExecLeavesNoFD)
}

// Output larger than a pipe's buffer and than the largest read is read
// whole from both streams while the process runs: the process would block
// on a full pipe otherwise.
func TestExecLargeOutputReadWhole(t *testing.T) {
	r := newTestRunner(t, Options{MaxOutput: 1 << 20})
	const n = 200_000 // over the 64 KiB of a pipe and many reads of readChunk
	res := r.Run(context.Background(), scriptReq(t.TempDir(),
		`head -c 200000 /dev/zero | tr '\0' a; head -c 200000 /dev/zero | tr '\0' b >&2`))
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	out := decodeOutputs(t, res.Outputs)
	if s, _ := out["stdout"].(string); s != strings.Repeat("a", n) {
		t.Errorf("stdout: %d bytes, want %d a's", len(s), n)
	}
	if s, _ := out["stderr"].(string); s != strings.Repeat("b", n) {
		t.Errorf("stderr: %d bytes, want %d b's", len(s), n)
	}
}

// Each attempt opens two pipes and a pidfd; none may outlive it, whether
// the attempt succeeds, fails or cannot start.
func TestExecLeavesNoFD(t *testing.T) {
	r := newTestRunner(t, Options{})
	dir := t.TempDir()
	run := func() {
		for _, script := range []string{"true", "echo out; echo err >&2; exit 3"} {
			r.Run(context.Background(), scriptReq(dir, script))
		}
		// Found in PATH, but the start fails (its directory is missing):
		// the pipes exist by then.
		r.Run(context.Background(), scriptReq(dir+"/missing", "true"))
	}
	run() // the shared directory and /dev/null are opened once, here
	before := openFDs(t)
	for range 10 {
		run()
	}
	if after := openFDs(t); after > before {
		t.Errorf("%d fds open after 30 attempts, %d before", after, before)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count fds: %v", err)
	}
	return len(ents)
}
