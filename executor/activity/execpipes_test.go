package activity

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The failure paths of attemptPipes.wait: a poll interrupted by signals,
// a poll that fails, a kernel without pidfds and a pidfd that never
// polls readable. Each must capture what the process printed and end
// the attempt soon after the process exits, whatever keeps its pipes open.

// withPoll makes poll(2) go through fn for the test.
func withPoll(t *testing.T, fn func(fds []unix.PollFd, timeout int) (int, error)) {
	t.Helper()
	saved := pollFDs
	pollFDs = fn
	t.Cleanup(func() { pollFDs = saved })
}

// withoutPidfd runs the test as on a kernel without pidfds.
func withoutPidfd(t *testing.T) {
	t.Helper()
	saved := usePidfd
	usePidfd = func() bool { return false }
	t.Cleanup(func() { usePidfd = saved })
}

// pipesOnly polls without the pidfd, as if it never became readable: only
// the pipes and the timeout can end a poll.
func pipesOnly(fds []unix.PollFd, timeout int) (int, error) {
	pipes := 0
	for _, f := range fds {
		if !isPipe(int(f.Fd)) {
			break
		}
		pipes++
	}
	return unix.Poll(fds[:pipes], timeout)
}

func isPipe(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// TestExecPipesModes runs the same attempts through every way wait can
// learn of the exit.
func TestExecPipesModes(t *testing.T) {
	modes := []struct {
		name  string
		setup func(t *testing.T)
	}{
		{name: "pidfd", setup: func(*testing.T) {}},
		{name: "no pidfd", setup: withoutPidfd},
		{name: "pidfd never readable", setup: func(t *testing.T) { withPoll(t, pipesOnly) }},
		{name: "every other poll interrupted", setup: func(t *testing.T) {
			var n atomic.Int64
			withPoll(t, func(fds []unix.PollFd, timeout int) (int, error) {
				if n.Add(1)%2 == 1 {
					return 0, unix.EINTR
				}
				return unix.Poll(fds, timeout)
			})
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			m.setup(t)
			t.Run("outputs", func(t *testing.T) {
				dir := t.TempDir()
				r := newTestRunner(t, Options{})
				// More than a pipe holds on stdout, so reads and writes
				// interleave with stderr's.
				res := r.Run(context.Background(), scriptReq(dir, `head -c 200000 /dev/zero | tr '\0' x; echo; echo oops >&2; exit 3`))
				if res.Failure == nil || res.Failure.Type != "exit:3" {
					t.Fatalf("failure = %+v, want exit:3", res.Failure)
				}
				out := decodeOutputs(t, res.Outputs)
				if got := out["stdout"].(string); len(got) != 200001 || strings.Trim(got, "x") != "\n" {
					t.Errorf("stdout: %d bytes, want 200000 x and a newline", len(got))
				}
				if got := out["stderr"]; got != "oops\n" {
					t.Errorf("stderr = %q", got)
				}
			})
			t.Run("lingering child", func(t *testing.T) {
				dir := t.TempDir()
				pidFile := filepath.Join(dir, "bg.pid")
				r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile), WaitDelay: 100 * time.Millisecond})
				begin := time.Now()
				res := r.Run(context.Background(), scriptReq(dir, startBG+`; echo done`))
				took := time.Since(begin)
				t.Cleanup(func() { _ = unix.Kill(readPID(t, pidFile), unix.SIGKILL) })
				if res.Failure != nil {
					t.Fatalf("failure %+v", *res.Failure)
				}
				// The exit is seen at once with a pidfd, within
				// exitProbe without: plus the 100ms of WaitDelay.
				if took > 5*time.Second {
					t.Errorf("Run took %v with a child holding stdout", took)
				}
				if out := decodeOutputs(t, res.Outputs); out["stdout"] != "done\n" {
					t.Errorf("stdout = %q", out["stdout"])
				}
			})
			// The wait goes on after both pipes are closed, until the
			// exit.
			t.Run("pipes closed before the exit", func(t *testing.T) {
				dir := t.TempDir()
				r := newTestRunner(t, Options{})
				res := r.Run(context.Background(), scriptReq(dir, `echo early; exec >/dev/null 2>&1; sleep 0.3; echo '{"late":true}' > "$WF_OUTPUT_FILE"`))
				if res.Failure != nil {
					t.Fatalf("failure %+v", *res.Failure)
				}
				out := decodeOutputs(t, res.Outputs)
				if out["stdout"] != "early\n" || out["result"] == nil {
					t.Errorf("outputs %s, want stdout early and the late result", res.Outputs)
				}
			})
			for _, c := range []struct{ name, script string }{
				{"cancel", bgScript},
				{"cancel after the pipes closed", `exec >/dev/null 2>&1; ` + bgScript},
			} {
				t.Run(c.name, func(t *testing.T) {
					dir := t.TempDir()
					pidFile := filepath.Join(dir, "bg.pid")
					r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile)})
					ctx, cancel := context.WithCancel(context.Background())
					go func() {
						waitFile(t, pidFile)
						cancel()
					}()
					begin := time.Now()
					res := r.Run(ctx, scriptReq(dir, c.script))
					if took := time.Since(begin); took > 10*time.Second {
						t.Errorf("Run took %v after cancellation", took)
					}
					if res.Failure == nil || res.Failure.Type != TypeInterrupted {
						t.Fatalf("failure = %+v, want interrupted", res.Failure)
					}
					waitDead(t, readPID(t, pidFile))
				})
			}
		})
	}
}

// A poll that fails (ENOMEM at worst) leaves nobody reading the pipes:
// the attempt kills the process group and fails, instead of hanging on a
// child blocked writing or running unwatched.
func TestExecPollFailureKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	var failed atomic.Bool
	withPoll(t, func(fds []unix.PollFd, timeout int) (int, error) {
		// Once the script has started its child, every poll fails.
		if _, err := os.Stat(pidFile); err == nil {
			failed.Store(true)
			return 0, unix.ENOMEM
		}
		return unix.Poll(fds, timeout)
	})
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile)})
	begin := time.Now()
	res := r.Run(context.Background(), scriptReq(dir, startBG+`; echo started; wait`))
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("Run took %v after the poll failed", took)
	}
	if res.Failure == nil || res.Failure.Type != TypeInternal || !strings.Contains(res.Failure.Message, "cannot allocate memory") {
		t.Fatalf("failure = %+v, want %s naming the poll error", res.Failure, TypeInternal)
	}
	if !failed.Load() {
		t.Fatal("no poll failed")
	}
	waitDead(t, readPID(t, pidFile))
}
