package activity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What an exec attempt leaves of its processes when it times out, is
// cancelled or leaves a child behind: nothing.

// pidAlive reports whether pid is a live (not zombie) process. A zombie
// counts as dead: in a container nobody may reap it.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("background process %d survived", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("background pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("background pid %q: %v", b, err)
	}
	return pid
}

// startBG starts `sleep 30` in the background (keeping stdout open) and
// records its pid in $BG_PID whole: written to a temporary name, then
// renamed, so that a test that sees the file (and cancels at once) never
// reads it before the pid is in it.
const startBG = `sleep 30 & echo $! > "$BG_PID.tmp" && mv "$BG_PID.tmp" "$BG_PID"`

// bgScript starts `sleep 30` in the background, records its pid and then
// blocks.
const bgScript = startBG + `; echo started; echo started >&2; wait`

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile)})
	req := scriptReq(dir, bgScript)
	req.Timeout = 500 * time.Millisecond

	begin := time.Now()
	res := r.Run(context.Background(), req)
	took := time.Since(begin)
	// The background sleep would hold Run for 30s: a generous bound
	// (load, the race detector) still tells a kill from a wait.
	if took > req.Timeout+10*time.Second {
		t.Errorf("Run took %v, want the timeout and a kill, not the 30s sleep", took)
	}
	if res.Failure == nil || res.Failure.Type != TypeTimeout {
		t.Fatalf("failure = %+v, want timeout", res.Failure)
	}
	if !strings.Contains(res.Failure.Message, "500ms") {
		t.Errorf("message %q does not name the timeout", res.Failure.Message)
	}
	out := decodeOutputs(t, res.Outputs)
	if out["stdout"] != "started\n" || out["exit_code"] != -1.0 {
		t.Errorf("outputs = %s", res.Outputs)
	}
	waitDead(t, readPID(t, pidFile))
}

func TestExecCancelInterrupts(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile)})
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(300*time.Millisecond, cancel)
	defer timer.Stop()
	req := scriptReq(dir, bgScript)
	req.Timeout = time.Minute

	begin := time.Now()
	res := r.Run(ctx, req)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("Run took %v after cancellation, want a kill, not the 30s sleep", took)
	}
	if res.Failure == nil || res.Failure.Type != TypeInterrupted {
		t.Fatalf("failure = %+v, want interrupted", res.Failure)
	}
	waitDead(t, readPID(t, pidFile))
}

func TestExecCancelledBeforeStart(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	r := newTestRunner(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Run(ctx, scriptReq(dir, "touch "+marker))
	if res.Failure == nil || res.Failure.Type != TypeInterrupted {
		t.Fatalf("failure = %+v, want interrupted", res.Failure)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Error("the process ran although ctx was already cancelled")
	}
}

// A background child that keeps stdout open after the leader exits must not
// hold Run until it finishes.
func TestExecLingeringChildDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile), WaitDelay: 200 * time.Millisecond})
	begin := time.Now()
	res := r.Run(context.Background(), scriptReq(dir, startBG+`; echo '{"done":true}'`))
	took := time.Since(begin)
	t.Cleanup(func() {
		if pid := readPID(t, pidFile); pidAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if took > 10*time.Second {
		t.Errorf("Run took %v; a lingering child held it (its sleep is 30s)", took)
	}
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	if out := decodeOutputs(t, res.Outputs); out["stdout"] != "{\"done\":true}\n" {
		t.Errorf("stdout = %q", out["stdout"])
	}
}
