package main

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// rssWatch follows the peak resident set of a running child: VmHWM in
// /proc/PID/status, read every few milliseconds until the child exits.
//
// The rusage of a waited-for child cannot say it on Linux: Go starts a
// child sharing the parent's memory until it execs, and exec folds that
// memory's high-water mark into the child's ru_maxrss, so a test process
// of 300 MB sees 300 MB for `true`. VmHWM belongs to the memory the child
// got at exec. Only growth in the last poll interval before the exit can
// be missed.
type rssWatch struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	peak  int64
}

const rssPoll = 2 * time.Millisecond

func watchRSS(pid int) *rssWatch {
	w := &rssWatch{stopc: make(chan struct{})}
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(rssPoll)
		defer t.Stop()
		for {
			if kb, ok := readVmHWM(path); ok {
				w.mu.Lock()
				w.peak = max(w.peak, kb<<10)
				w.mu.Unlock()
			}
			select {
			case <-w.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// stop ends the watch and returns the peak in bytes (0 if never read).
func (w *rssWatch) stop() int64 {
	close(w.stopc)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// readVmHWM returns the VmHWM line of a /proc status file, in KiB.
func readVmHWM(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	i := bytes.Index(b, []byte("VmHWM:"))
	if i < 0 {
		return 0, false // a zombie has no memory left to report
	}
	f := bytes.Fields(b[i+len("VmHWM:"):])
	if len(f) == 0 {
		return 0, false
	}
	kb, err := strconv.ParseInt(string(f[0]), 10, 64)
	return kb, err == nil
}

// runWatched starts cmd, waits for it, and returns its peak resident set
// in bytes.
func runWatched(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	w := watchRSS(cmd.Process.Pid)
	err := cmd.Wait()
	return w.stop(), err
}

// TestRSSWatchIsTheChilds: a child that holds little reports little, even
// from a test process that holds a lot (which its rusage would report).
func TestRSSWatchIsTheChilds(t *testing.T) {
	ballast := make([]byte, 256<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	cmd := exec.Command("sleep", "0.2")
	rss, err := runWatched(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if rss == 0 || rss > 64<<20 {
		t.Errorf("sleep's peak RSS read as %d bytes, want a few MB", rss)
	}
	_ = ballast[len(ballast)-1]
}
