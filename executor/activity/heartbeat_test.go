package activity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// beats records what the heartbeat hook was told.
type beats struct {
	mu   sync.Mutex
	seen []string
}

func (b *beats) hook(d string) {
	b.mu.Lock()
	b.seen = append(b.seen, d)
	b.mu.Unlock()
}

func (b *beats) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

// TestHeartbeatKeepsAttemptAlive: an attempt that writes to
// $WF_HEARTBEAT_FILE more often than its timeout runs to its end, well
// past the timeout; each write reaches the hook, and the last content is
// the attempt's details.
func TestHeartbeatKeepsAttemptAlive(t *testing.T) {
	dir := t.TempDir()
	r := newTestRunner(t, Options{})
	req := scriptReq(dir, `for i in 1 2 3 4 5 6 7 8; do echo "step $i" > "$WF_HEARTBEAT_FILE"; sleep 0.1; done`)
	req.HeartbeatTimeout = 2 * time.Second
	var b beats
	res := r.Run(WithHeartbeatHook(context.Background(), b.hook), req)
	if res.Failure != nil {
		t.Fatalf("failure %+v", res.Failure)
	}
	if res.HeartbeatDetails != "step 8" {
		t.Errorf("details = %q, want the last write", res.HeartbeatDetails)
	}
	if got := b.list(); len(got) < 2 || !strings.HasPrefix(got[0], "step ") {
		t.Errorf("hook saw %q, want a beat per poll that saw a write", got)
	}
}

// TestHeartbeatTimeoutKillsGroup: an attempt that stops heartbeating is
// killed with its whole process group at its deadline, with error type
// heartbeat_timeout, and keeps the details it wrote before it hung.
func TestHeartbeatTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile)})
	req := scriptReq(dir, `echo "row 42" > "$WF_HEARTBEAT_FILE"; `+bgScript)
	req.HeartbeatTimeout = 400 * time.Millisecond
	req.Timeout = time.Minute
	begin := time.Now()
	res := r.Run(context.Background(), req)
	if took := time.Since(begin); took > 20*time.Second {
		t.Errorf("Run took %v: the hung attempt was not killed at its deadline", took)
	}
	if res.Failure == nil || res.Failure.Type != TypeHeartbeatTimeout {
		t.Fatalf("failure = %+v, want heartbeat_timeout", res.Failure)
	}
	if !strings.Contains(res.Failure.Message, "400ms") || !strings.Contains(res.Failure.Message, "process group killed") {
		t.Errorf("message = %q", res.Failure.Message)
	}
	if res.HeartbeatDetails != "row 42" {
		t.Errorf("details = %q", res.HeartbeatDetails)
	}
	waitDead(t, readPID(t, pidFile))
}

// TestHeartbeatNeverBeats: the deadline counts from the start.
func TestHeartbeatNeverBeats(t *testing.T) {
	dir := t.TempDir()
	r := newTestRunner(t, Options{})
	req := scriptReq(dir, `sleep 30`)
	req.HeartbeatTimeout = 300 * time.Millisecond
	res := r.Run(context.Background(), req)
	if res.Failure == nil || res.Failure.Type != TypeHeartbeatTimeout || !strings.Contains(res.Failure.Message, "since the attempt started") {
		t.Fatalf("failure = %+v", res.Failure)
	}
	if res.HeartbeatDetails != "" {
		t.Errorf("details = %q", res.HeartbeatDetails)
	}
}

// TestHeartbeatEnv: $WF_HEARTBEAT_FILE exists (empty, the attempt's own)
// only with a heartbeat timeout; $WF_HEARTBEAT_DETAILS carries the
// previous attempt's details whenever there are some.
func TestHeartbeatEnv(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	r := newTestRunner(t, Options{TempDir: tmp})
	req := scriptReq(dir, `test -f "$WF_HEARTBEAT_FILE" && test ! -s "$WF_HEARTBEAT_FILE" && echo FILE=ok; env`)
	req.HeartbeatTimeout = 5 * time.Second
	req.HeartbeatDetails = "offset=1024"
	res := r.Run(context.Background(), req)
	env := parseEnv(decodeOutputs(t, res.Outputs)["stdout"].(string))
	if env["FILE"] != "ok" || !strings.HasPrefix(env["WF_HEARTBEAT_FILE"], tmp) || env["WF_HEARTBEAT_DETAILS"] != "offset=1024" {
		t.Errorf("env = %v", env)
	}
	req.HeartbeatTimeout = 0
	res = r.Run(context.Background(), req)
	env = parseEnv(decodeOutputs(t, res.Outputs)["stdout"].(string))
	if _, ok := env["WF_HEARTBEAT_FILE"]; ok {
		t.Errorf("WF_HEARTBEAT_FILE without heartbeat_timeout: %v", env)
	}
	if env["WF_HEARTBEAT_DETAILS"] != "offset=1024" {
		t.Errorf("WF_HEARTBEAT_DETAILS = %q", env["WF_HEARTBEAT_DETAILS"])
	}
}

// fakeNow is a clock the test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestHeartbeatDeadlineFakeClock: the deadline is the last beat (or the
// start) plus the timeout on the runner's clock: an hour-long timeout is
// met by a beat 59 minutes in, then missed an hour after that beat, and
// not before.
func TestHeartbeatDeadlineFakeClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hb")
	if err := createHeartbeatFile(path); err != nil {
		t.Fatal(err)
	}
	clk := &fakeNow{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	killed := make(chan error, 1)
	var b beats
	ctx := WithHeartbeatHook(context.Background(), b.hook)
	w := watchHeartbeat(ctx, path, time.Hour, clk.now, func(err error) { killed <- err })
	poll := heartbeatPoll(time.Hour)
	waitPolls := func() { time.Sleep(3 * poll) }

	clk.add(59 * time.Minute)
	if err := os.WriteFile(path, []byte("step 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitPolls()
	if got := b.list(); len(got) == 0 || got[len(got)-1] != "step 1" {
		t.Fatalf("the beat was not seen: %q", got)
	}
	clk.add(59 * time.Minute) // 1h58m: 59 minutes after the beat
	waitPolls()
	select {
	case err := <-killed:
		t.Fatalf("killed %v after the last beat: %v", 59*time.Minute, err)
	default:
	}
	clk.add(2 * time.Minute) // 61 minutes after the beat
	select {
	case err := <-killed:
		if !errors.Is(err, errHeartbeat) {
			t.Fatalf("cause = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not killed an hour after the last beat")
	}
	details, timedOut, since, n := w.stop()
	if details != "step 1" || !timedOut || since != 61*time.Minute || n != 1 {
		t.Errorf("stop = %q %v %v %d", details, timedOut, since, n)
	}
}
