package activity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Heartbeats of exec attempts (SPEC §11). An attempt with a heartbeat
// timeout gets $WF_HEARTBEAT_FILE, a file the runner creates empty; any
// write to it (its modification time or size changes) is a beat, and what
// the file holds is the attempt's progress details. The runner polls the
// file, tells the heartbeat hook of the context (WithHeartbeatHook) about
// each beat, and kills the attempt's process group when no beat came for
// the timeout (from the start, then from the last beat): the attempt then
// fails with TypeHeartbeatTimeout. The last details are in Result, for
// the next attempt's $WF_HEARTBEAT_DETAILS.

// TypeHeartbeatTimeout: an exec attempt did not write to
// $WF_HEARTBEAT_FILE within its heartbeat timeout; its process group was
// killed.
const TypeHeartbeatTimeout = "heartbeat_timeout"

// MaxHeartbeatDetails bounds the details read from $WF_HEARTBEAT_FILE.
const MaxHeartbeatDetails = 4 << 10

type heartbeatHookKey struct{}

// WithHeartbeatHook returns a context under which every exec attempt
// with a heartbeat timeout calls hook with what $WF_HEARTBEAT_FILE holds
// (at most MaxHeartbeatDetails bytes, maybe empty) each time the attempt
// writes to it. The hook runs on the attempt's watcher goroutine and must
// not block.
func WithHeartbeatHook(ctx context.Context, hook func(details string)) context.Context {
	return context.WithValue(ctx, heartbeatHookKey{}, hook)
}

func heartbeatHook(ctx context.Context) func(string) {
	h, _ := ctx.Value(heartbeatHookKey{}).(func(string))
	return h
}

// errHeartbeat is the cancel cause of an attempt killed at its deadline.
var errHeartbeat = errors.New("heartbeat timeout")

// heartbeatPoll is how often the file is looked at for a timeout: often
// enough that the kill comes at most a tenth of the timeout late (and at
// most 250ms), rarely enough to cost nothing.
func heartbeatPoll(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 10*time.Millisecond), 250*time.Millisecond)
}

// heartbeatWatch watches one attempt's heartbeat file.
type heartbeatWatch struct {
	path    string
	timeout time.Duration
	now     func() time.Time
	hook    func(string)
	kill    context.CancelCauseFunc

	done, exited chan struct{}

	mu       sync.Mutex
	last     time.Time // the last beat, or the start
	beats    int
	details  string // the last non-empty content read
	modTime  time.Time
	size     int64
	timedOut bool
}

// createHeartbeatFile makes the empty file an attempt writes its beats to.
func createHeartbeatFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create $WF_HEARTBEAT_FILE: %w", err)
	}
	return f.Close()
}

// watchHeartbeat starts watching path for an attempt that has just
// started; kill cancels the attempt (killing its process group).
func watchHeartbeat(ctx context.Context, path string, timeout time.Duration, now func() time.Time, kill context.CancelCauseFunc) *heartbeatWatch {
	w := &heartbeatWatch{path: path, timeout: timeout, now: now, hook: heartbeatHook(ctx), kill: kill,
		done: make(chan struct{}), exited: make(chan struct{}), last: now()}
	if fi, err := os.Stat(path); err == nil {
		w.modTime, w.size = fi.ModTime(), fi.Size()
	}
	go w.run()
	return w
}

func (w *heartbeatWatch) run() {
	defer close(w.exited)
	t := time.NewTicker(heartbeatPoll(w.timeout))
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		w.look()
		w.mu.Lock()
		late := w.now().Sub(w.last) > w.timeout
		if late {
			w.timedOut = true
		}
		w.mu.Unlock()
		if late {
			w.kill(errHeartbeat)
			return
		}
	}
}

// look checks the file for a beat.
func (w *heartbeatWatch) look() {
	fi, err := os.Stat(w.path)
	if err != nil {
		return // removed or replaced by the activity: no beat
	}
	w.mu.Lock()
	changed := !fi.ModTime().Equal(w.modTime) || fi.Size() != w.size
	if changed {
		w.modTime, w.size = fi.ModTime(), fi.Size()
		w.last = w.now()
		w.beats++
	}
	w.mu.Unlock()
	if !changed {
		return
	}
	d := readDetails(w.path)
	w.mu.Lock()
	if d != "" {
		w.details = d
	}
	w.mu.Unlock()
	if w.hook != nil {
		w.hook(d)
	}
}

// stop ends the watch once the process has exited and returns the last
// details (the file is read one last time: the process may have written
// after the last look) and whether the watch killed the attempt.
func (w *heartbeatWatch) stop() (details string, timedOut bool, since time.Duration, beats int) {
	close(w.done)
	<-w.exited
	if d := readDetails(w.path); d != "" {
		w.details = d
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.details, w.timedOut, w.now().Sub(w.last), w.beats
}

// readDetails is what the heartbeat file holds, at most
// MaxHeartbeatDetails bytes without surrounding white space.
func readDetails(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxHeartbeatDetails))
	if err != nil {
		return ""
	}
	// A NUL cannot travel in $WF_HEARTBEAT_DETAILS.
	return strings.TrimSpace(strings.ReplaceAll(firstBytes(b, MaxHeartbeatDetails), "\x00", ""))
}

// heartbeatFailure is the failure of an attempt killed at its deadline.
func heartbeatFailure(timeout, since time.Duration, beats int, notes ...string) *Failure {
	last := "since the attempt started"
	if beats > 0 {
		last = fmt.Sprintf("after %d %s; the last %s ago", beats, pluralWord(beats, "heartbeat", "heartbeats"), since.Round(time.Millisecond))
	}
	msg := fmt.Sprintf("no heartbeat within heartbeat_timeout %s (%s); process group killed", timeout, last)
	return &Failure{Type: TypeHeartbeatTimeout, Message: joinNotes(append([]string{msg}, notes...)...)}
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
