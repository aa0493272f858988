package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The harness of the durability tests (durability_test.go says what they
// do) and of every test that runs the real binary: the binary built once,
// the recording activity script, and a wf process followed by its events.

var durBin struct {
	once sync.Once
	path string
	err  error
	dir  string
}

// durBinary builds cmd/wf once per test binary.
func durBinary(t testing.TB) string {
	t.Helper()
	durBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "wf-bin-")
		if err != nil {
			durBin.err = err
			return
		}
		durBin.dir = dir
		durBin.path = filepath.Join(dir, "wf")
		args := []string{"build", "-o", durBin.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			durBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if durBin.err != nil {
		t.Fatal(durBin.err)
	}
	return durBin.path
}

// durRecorder is the activity every durability test runs: it appends one line
// per attempt to $LOG with what it saw, on its own clock, then behaves as
// the environment says.
const durRecorder = `#!/bin/sh
now=$(date +%s%N)
echo "$WF_ACTIVITY $WF_ATTEMPT $WF_IDEMPOTENCY_KEY $now $$" >> "$LOG"
if [ -n "$HANG_ON" ] && [ "$WF_ATTEMPT" = "$HANG_ON" ]; then
  echo $$ > "$LOG.hang.pid"
  sleep 30
fi
if [ -n "$SLEEP_MS" ]; then
  sleep "$(awk "BEGIN{print $SLEEP_MS/1000}")"
fi
if [ "$WF_ATTEMPT" -lt "${SUCCEED_ON:-1}" ]; then
  echo "failing attempt $WF_ATTEMPT" >&2
  exit 3
fi
echo '{"ok": true}'
`

type durAttempt struct {
	Activity string
	Number   int
	Key      string
	At       time.Time
	PID      int
}

func durReadLog(t *testing.T, path string) []durAttempt {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []durAttempt
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		pid, _ := strconv.Atoi(f[4])
		out = append(out, durAttempt{Activity: f[0], Number: n, Key: f[2], At: time.Unix(0, ns), PID: pid})
	}
	return out
}

// durSetup writes a configuration with one recorder activity per entry of
// activities (name -> HCL body lines after exec) into a temp dir.
// needRoot stops a test that needs root to do what it checks (mount,
// chown, run as another user): CI runs as root, so there the test fails
// rather than skips; elsewhere it skips, saying why.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s needs root; CI runs as root", why)
	}
	t.Skipf("%s needs root (CI runs as root)", why)
}

func durSetup(t *testing.T, hcl string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rec.sh"), []byte(durRecorder), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type durProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []map[string]any
	stderr bytes.Buffer
	done   chan struct{}
	exit   int
}

// lastEvents is the last n events p printed, one JSON line each, for a
// failure's message.
func (p *durProc) lastEvents(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, ev := range p.events[max(0, len(p.events)-n):] {
		line, _ := json.Marshal(ev)
		b.WriteString("  ")
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// durStart runs `wf apply -auto-approve -json DIR` in the background.
func durStart(t *testing.T, dir string, extra ...string) *durProc {
	t.Helper()
	args := append([]string{"apply", "-auto-approve", "-json"}, extra...)
	args = append(args, dir)
	cmd := exec.Command(durBinary(t), args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	p := &durProc{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				p.mu.Lock()
				p.events = append(p.events, ev)
				p.mu.Unlock()
			}
		}
		err := cmd.Wait()
		p.exit = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.exit = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.exit = -int(ws.Signal())
			}
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitEvent waits until an event matching pred has been printed.
func (p *durProc) waitEvent(t *testing.T, timeout time.Duration, what string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, ev := range p.events {
			if pred(ev) {
				p.mu.Unlock()
				return ev
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			p.mu.Lock()
			for _, ev := range p.events {
				if pred(ev) {
					p.mu.Unlock()
					return ev
				}
			}
			p.mu.Unlock()
			t.Fatalf("wf exited (%d) before %s; stderr:\n%s", p.exit, what, p.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("timed out waiting for %s; stderr:\n%s", what, p.stderr.String())
	return nil
}

func (p *durProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exit
	case <-time.After(timeout):
		t.Fatalf("wf did not exit within %v; stderr:\n%s", timeout, p.stderr.String())
		return 0
	}
}

func (p *durProc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// kill9IfRunning is kill9 for a process that may be exiting on its own:
// it reports whether the kill ended it. False: it had exited first (and
// was reaped, or was a zombie the signal could not touch), and p.exit
// holds its own exit status, for the caller to judge.
func (p *durProc) kill9IfRunning(t *testing.T) bool {
	t.Helper()
	err := p.cmd.Process.Signal(syscall.SIGKILL)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-p.done
	return p.exit == -int(syscall.SIGKILL)
}

func isType(typ string) func(map[string]any) bool {
	return func(ev map[string]any) bool { return ev["type"] == typ }
}

func eventTime(t *testing.T, ev map[string]any, field string) time.Time {
	t.Helper()
	s, _ := ev[field].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("event %v: bad %s: %v", ev, field, err)
	}
	return at
}

// durHistory returns `wf history -json INSTANCE ACTIVITY` as decoded objects.
func durHistory(t *testing.T, dir, instance, activity string) []map[string]any {
	t.Helper()
	out, err := exec.Command(durBinary(t), "history", "-json", instance, activity, dir).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("wf history: %v\n%s", err, stderr)
	}
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("history line %q: %v", line, err)
		}
		rows = append(rows, row)
	}
	return rows
}

func keysOf(as []durAttempt) map[string]bool {
	m := map[string]bool{}
	for _, a := range as {
		m[a.Key] = true
	}
	return m
}
