package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/metrics"
)

// TestServeFollowsBus: Start follows a bus; Listen serves the metrics at
// /metrics while events arrive, and a taken port is an error up front.
func TestServeFollowsBus(t *testing.T) {
	bus := event.NewBus()
	m := metrics.Start(context.Background(), bus.Subscribe(), metrics.Options{})
	srv, err := metrics.Listen("127.0.0.1:0", m.Handler())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := metrics.Listen(srv.Addr(), m.Handler()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("second Listen on %s: %v", srv.Addr(), err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bus.Publish(event.Event{Type: event.AttemptStarted, Workflow: "w", Instance: "w/k", Activity: "activity.a", Kind: "exec", Attempt: 1})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get("/metrics")
		if strings.Contains(body, "\nwf_running_attempts 1\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scrape never showed the running attempt:\n%s", body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _ := get("/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d", code)
	}
	bus.Close()
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after the bus closed")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", srv.Addr()); err == nil {
		t.Error("still listening after Close")
	}
}

// TestWriteFileAtomic: readers of the metrics file only ever see a whole
// file, even while it is rewritten in a loop; nothing else is left in the
// directory; the collector (another user) can read it.
func TestWriteFileAtomic(t *testing.T) {
	f := newFeed()
	for i := range 300 {
		f.send(f.ev(event.AttemptFailed, "a"+strings.Repeat("x", i%7), 1, errOf("exit:1"), dur(time.Millisecond)))
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "wf.prom")
	if err := f.m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := f.m.WriteFile(path); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 200 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(whole) {
			t.Fatalf("read a partial file: %d bytes of %d", len(b), len(whole))
		}
	}
	close(stop)
	wg.Wait()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("directory holds %v, want only wf.prom", ents)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if strings.Contains(string(whole), "go_goroutines") {
		t.Error("the text file holds Go runtime metrics, which collide with node_exporter's")
	}
}

// TestFileWriterEvery: the file is written at once, again on every tick,
// and a last time at Close; a path that cannot be written is an error
// before anything runs; a later failure is a warning, said once.
func TestFileWriterEvery(t *testing.T) {
	f := newFeed()
	dir := t.TempDir()
	path := filepath.Join(dir, "wf.prom")
	var mu sync.Mutex
	var warnings []error
	fw, err := f.m.WriteFileEvery(path, 20*time.Millisecond, func(err error) {
		mu.Lock()
		warnings = append(warnings, err)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if !strings.Contains(read(), "wf_running_attempts 0") {
		t.Fatalf("first write:\n%s", read())
	}
	f.send(f.ev(event.AttemptStarted, "a", 1))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(read(), "wf_running_attempts 1") {
		if time.Now().After(deadline) {
			t.Fatal("the periodic write never showed the new event")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Take the directory away for a while (root ignores modes): the
	// failure is warned about once, not on every tick, and the run goes on.
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(warnings) != 1 || !errors.Is(warnings[0], os.ErrNotExist) {
		t.Errorf("warnings for one lasting failure: %v, want one", warnings)
	}
	mu.Unlock()
	f.send(f.ev(event.AttemptSucceeded, "a", 1, dur(time.Millisecond)))
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(read(), "wf_running_attempts 0") {
		t.Errorf("Close did not write the last state:\n%s", read())
	}
	_, err = f.m.WriteFileEvery(filepath.Join(dir, "missing", "wf.prom"), time.Second, nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unwritable path: %v", err)
	}
}

// TestFollowStopCountsQueued: stopping Follow (as wf apply does at exit)
// still counts every event published before, at once, pacing or not.
func TestFollowStopCountsQueued(t *testing.T) {
	bus := event.NewBus()
	ctx, stop := context.WithCancel(context.Background())
	m := metrics.Start(ctx, bus.Subscribe(), metrics.Options{NoRuntime: true})
	for i := 1; i <= 50; i++ {
		bus.Publish(event.Event{Type: event.AttemptStarted, Workflow: "w", Instance: "w/k", Activity: fmt.Sprintf("activity.a%d", i), Kind: "exec", Attempt: 1})
		time.Sleep(time.Millisecond) // many small batches, as in a run
	}
	bus.Close()
	stop()
	m.Wait()
	if !strings.Contains(string(m.AppendText(nil)), "\nwf_running_attempts 50\n") {
		t.Errorf("not every event counted:\n%s", m.AppendText(nil))
	}
}
