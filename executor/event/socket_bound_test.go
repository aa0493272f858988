package event

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitSeq waits until the server has taken n events off the bus.
func waitSeq(t *testing.T, c any, n uint64) {
	t.Helper()
	s := c.(*server)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		seq := s.seq
		s.mu.Unlock()
		if seq >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("server did not take %d events off the bus in time", n)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStalledClientsKeepMemoryBounded: 200 watchers that connect and never
// read, during a run of 100,000 events, cost the server a bounded amount of
// heap. (With unbounded per-client queues the first check already sees
// about 200 x 2,000 events, over 100 MB.)
func TestStalledClientsKeepMemoryBounded(t *testing.T) {
	const clients, events, step = 200, 100_000, 2_000
	const limit = 48 << 20
	bus := NewBus()
	path := shortSockPath(t)
	srv, err := Serve(context.Background(), path, bus, ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	bus.Publish(Event{Type: Plan, Instance: "w/k", Activities: []ActivityInfo{{Activity: "activity.a"}}})
	waitSeq(t, srv, 1)
	var conns []net.Conn
	for i := 0; i < clients; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Wait until the server has registered every client.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := srv.(*server)
		s.mu.Lock()
		n := len(s.clients)
		s.mu.Unlock()
		if n == clients {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d clients registered", n, clients)
		}
		time.Sleep(time.Millisecond)
	}

	base := heapInUse()
	msg := strings.Repeat("m", 200) // ~450-byte lines
	var peak uint64
	for sent := 0; sent < events; {
		for i := 0; i < step; i++ {
			sent++
			bus.Publish(Event{Type: AttemptFailed, Instance: "w/k", Activity: fmt.Sprintf("activity.a%d", sent%50),
				Attempt: sent, Error: &Error{Type: "http:503", Message: msg}})
		}
		waitSeq(t, srv, uint64(1+sent))
		h := heapInUse()
		peak = max(peak, h)
		if h > base+limit {
			t.Fatalf("after %d events the heap grew by %d MiB (limit %d MiB)", sent, (h-base)>>20, limit>>20)
		}
	}
	t.Logf("heap growth with %d stalled clients over %d events: peak %.1f MiB", clients, events, float64(peak-base)/(1<<20))
	s := srv.(*server)
	s.mu.Lock()
	behind := 0
	for c := range s.clients {
		c.mu.Lock()
		if c.behind && len(c.queue) == 0 {
			behind++
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	if behind != clients {
		t.Errorf("%d of %d stalled clients were marked behind with an empty queue", behind, clients)
	}
}

// TestStalledClientCatchesUpWithSnapshot: a watcher that stops reading
// while the run goes on gets, once it reads again, a fresh snapshot: every
// activity's latest state (even when it fell out of the recent history),
// the recent events, then the live stream, each event once and in order.
func TestStalledClientCatchesUpWithSnapshot(t *testing.T) {
	bus := NewBus()
	path := shortSockPath(t)
	srv, err := Serve(context.Background(), path, bus, ServeOptions{History: 100, ClientQueueEvents: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	bus.Publish(Event{Type: Plan, Instance: "w/k"})
	waitSeq(t, srv, 1)
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// Early activities finish, then one busy activity produces far more
	// events than the history keeps, while the client does not read.
	const early, busy = 20, 20_000
	for i := 0; i < early; i++ {
		bus.Publish(Event{Type: ActivitySucceeded, Instance: "w/k", Activity: fmt.Sprintf("activity.e%d", i)})
	}
	pad := strings.Repeat("p", 300)
	for i := 1; i <= busy; i++ {
		bus.Publish(Event{Type: AttemptFailed, Instance: "w/k", Activity: "activity.busy", Attempt: i, Error: &Error{Type: "x", Message: pad}})
	}
	waitSeq(t, srv, 1+early+busy)

	var mu sync.Mutex
	var got []Event
	done := make(chan error, 1)
	go func() {
		done <- readStream(conn, func(evs ...Event) {
			mu.Lock()
			got = append(got, evs...)
			mu.Unlock()
		})
	}()
	// Let it catch up, then finish the run.
	time.Sleep(200 * time.Millisecond)
	bus.Publish(Event{Type: RunCompleted, Instance: "w/k", Status: StatusSucceeded})
	bus.Close()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the client was not disconnected at the end of the run")
	}

	mu.Lock()
	defer mu.Unlock()
	if len(got) >= 1+early+busy+1 {
		t.Fatalf("got all %d events: the client was never behind, so the test proves nothing", len(got))
	}
	if got[0].Type != Plan {
		t.Errorf("first event %s, want the plan", got[0].Type)
	}
	if last := got[len(got)-1]; last.Type != RunCompleted {
		t.Errorf("last event %s, want run_completed", last.Type)
	}
	succeeded := map[string]bool{}
	lastAttempt := 0
	for _, ev := range got {
		switch ev.Type {
		case ActivitySucceeded:
			succeeded[ev.Activity] = true
		case AttemptFailed:
			if ev.Attempt <= lastAttempt {
				t.Fatalf("attempt %d after %d: an event repeated or out of order", ev.Attempt, lastAttempt)
			}
			lastAttempt = ev.Attempt
		}
	}
	if len(succeeded) != early {
		t.Errorf("the client knows %d of %d finished activities", len(succeeded), early)
	}
	if lastAttempt != busy {
		t.Errorf("last attempt seen %d, want %d", lastAttempt, busy)
	}
}

// TestSocketNeverReachableByOthers: under umask 000 the socket is never seen
// at its path with a mode other than 0600, not even for an instant, and no
// private bind directory is left behind.
func TestSocketNeverReachableByOthers(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := shortSockPath(t)
	stop := make(chan struct{})
	seen := make(chan fs.FileMode, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if fi, err := os.Lstat(path); err == nil && fi.Mode().Perm() != 0o600 {
				select {
				case seen <- fi.Mode():
				default:
				}
			}
		}
	}()
	for i := 0; i < 300; i++ {
		c, err := Serve(context.Background(), path, NewBus(), ServeOptions{})
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		c.Close()
	}
	close(stop)
	wg.Wait()
	select {
	case m := <-seen:
		t.Fatalf("socket seen at its path with mode %v", m)
	default:
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestServeRemovesStaleBindDirectory: a private bind directory left by an
// apply killed between bind and rename is cleaned up; anything else that
// merely shares the prefix is left alone.
func TestServeRemovesStaleBindDirectory(t *testing.T) {
	path := shortSockPath(t)
	parent := filepath.Dir(path)
	stale := filepath.Join(parent, bindDirPrefix+"123")
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(stale, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	keep := filepath.Join(parent, bindDirPrefix+"keep")
	if err := os.Mkdir(keep, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keep, "data"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Serve(context.Background(), path, NewBus(), ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale bind directory still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(keep, "data")); err != nil || !bytes.Equal(b, []byte("mine")) {
		t.Errorf("a directory that is not a bind directory was touched: %v", err)
	}
}

// TestServeRefusesSymlink: a symlink planted at the socket path is neither
// followed nor replaced.
func TestServeRefusesSymlink(t *testing.T) {
	path := shortSockPath(t)
	target := filepath.Join(filepath.Dir(path), "target")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(context.Background(), path, NewBus(), ServeOptions{}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Serve over a symlink: %v", err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("symlink replaced: %v", err)
	}
}
