package event

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// shortSockPath keeps the socket path under the 108-byte sun_path limit,
// which t.TempDir paths can exceed on some systems.
func shortSockPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wfsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "events.sock")
}

func serve(t *testing.T, bus *Bus, opts ServeOptions) string {
	t.Helper()
	path := shortSockPath(t)
	c, err := Serve(context.Background(), path, bus, opts)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return path
}

func dial(t *testing.T, path string) *Subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub, err := Dial(ctx, path)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return sub
}

// collect reads from sub until it has n events or the deadline passes.
func collect(t *testing.T, sub *Subscription, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []Event
	for len(got) < n {
		batch, ok := sub.Next(ctx)
		if !ok {
			break
		}
		got = append(got, batch...)
	}
	if len(got) != n {
		t.Fatalf("got %d events, want %d", len(got), n)
	}
	return got
}

func attempts(evs []Event) []int {
	out := make([]int, len(evs))
	for i, e := range evs {
		out[i] = e.Attempt
	}
	return out
}

func TestSocketTwoClientsSeeEveryEventInOrder(t *testing.T) {
	bus := NewBus()
	path := serve(t, bus, ServeOptions{})
	// A marker event lets each client prove it is registered before the
	// test publishes the stream proper.
	bus.Publish(Event{Type: Plan, Instance: "w/k"})
	a, b := dial(t, path), dial(t, path)
	collect(t, a, 1)
	collect(t, b, 1)
	for i := 1; i <= 500; i++ {
		bus.Publish(Event{Type: AttemptStarted, Instance: "w/k", Activity: "activity.a", Attempt: i})
	}
	for name, sub := range map[string]*Subscription{"a": a, "b": b} {
		got := attempts(collect(t, sub, 500))
		for i, n := range got {
			if n != i+1 {
				t.Fatalf("client %s: event %d has attempt %d", name, i, n)
			}
		}
	}
}

func TestSocketLateJoinReplay(t *testing.T) {
	tests := []struct {
		name     string
		history  int
		publish  int
		wantPlan bool
		want     []int // attempts replayed after the plan events
	}{
		{name: "all kept", history: 100, publish: 5, wantPlan: true, want: []int{1, 2, 3, 4, 5}},
		{name: "bounded", history: 3, publish: 7, wantPlan: true, want: []int{5, 6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bus := NewBus()
			path := serve(t, bus, ServeOptions{History: tt.history})
			bus.Publish(Event{Type: Plan, Instance: "w/k", Activities: []ActivityInfo{{Activity: "activity.old"}}})
			bus.Publish(Event{Type: Plan, Instance: "w/k", Activities: []ActivityInfo{{Activity: "activity.a"}}})
			for i := 1; i <= tt.publish; i++ {
				bus.Publish(Event{Type: AttemptStarted, Instance: "w/k", Activity: "activity.a", Attempt: i})
			}
			// A first client proves the server has recorded everything: it
			// may get part of the stream live, so read up to the last event.
			first := dial(t, path)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for seen := false; !seen; {
				batch, ok := first.Next(ctx)
				if !ok {
					t.Fatal("first client never saw the last event")
				}
				seen = batch[len(batch)-1].Attempt == tt.publish
			}
			late := dial(t, path)
			got := collect(t, late, 1+len(tt.want))
			if got[0].Type != Plan || got[0].Activities[0].Activity != "activity.a" {
				t.Fatalf("replay starts with %+v, want the latest plan event", got[0])
			}
			gotN := attempts(got[1:])
			for i := range tt.want {
				if gotN[i] != tt.want[i] {
					t.Fatalf("replayed attempts %v, want %v", gotN, tt.want)
				}
			}
			// And it goes on live after the replay.
			bus.Publish(Event{Type: RunCompleted, Status: StatusSucceeded})
			if ev := collect(t, late, 1)[0]; ev.Type != RunCompleted {
				t.Fatalf("live event %v, want run_completed", ev.Type)
			}
		})
	}
}

func TestSocketVanishedClientDoesNotBlock(t *testing.T) {
	bus := NewBus()
	path := serve(t, bus, ServeOptions{})
	// A raw client that never reads, and one that hangs up at once.
	stuck, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	gone, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	good := dial(t, path)

	done := make(chan struct{})
	big := make([]ActivityInfo, 50)
	go func() {
		defer close(done)
		// About 6 MB: enough to fill the socket buffers of the stuck
		// client many times over.
		for i := 1; i <= 2000; i++ {
			bus.Publish(Event{Type: AttemptFailed, Attempt: i, Activities: big})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish blocked behind a client that does not read")
	}
	got := collect(t, good, 2000)
	if got[1999].Attempt != 2000 {
		t.Fatalf("last event attempt %d", got[1999].Attempt)
	}
}

func TestSocketFireNowCallback(t *testing.T) {
	bus := NewBus()
	type call struct{ instance, activity string }
	calls := make(chan call, 1)
	path := serve(t, bus, ServeOptions{OnFireNow: func(i, a string) { calls <- call{i, a} }})
	sub := dial(t, path)
	if err := sub.FireNow("order/1001", "activity.charge_card"); err != nil {
		t.Fatalf("FireNow: %v", err)
	}
	select {
	case c := <-calls:
		if c != (call{"order/1001", "activity.charge_card"}) {
			t.Fatalf("callback got %+v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnFireNow was not called")
	}
	if err := bus.Subscribe().FireNow("x", "y"); !errors.Is(err, ErrNotRemote) {
		t.Fatalf("local FireNow error %v, want ErrNotRemote", err)
	}
}

func TestDialWithoutServer(t *testing.T) {
	missing := shortSockPath(t)
	stale := shortSockPath(t)
	// A socket file whose listener is gone refuses connections.
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	for name, path := range map[string]string{"missing": missing, "refused": stale} {
		t.Run(name, func(t *testing.T) {
			_, err := Dial(context.Background(), path)
			if !errors.Is(err, ErrNoApply) {
				t.Fatalf("Dial error %v, want ErrNoApply", err)
			}
		})
	}
}

func TestServeReplacesStaleSocketAndCleansUp(t *testing.T) {
	path := shortSockPath(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()

	bus := NewBus()
	c, err := Serve(context.Background(), path, bus, ServeOptions{})
	if err != nil {
		t.Fatalf("Serve over a stale socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("socket mode %o, want 600", perm)
	}
	sub := dial(t, path)
	bus.Publish(Event{Type: Plan})
	collect(t, sub, 1)
	// The apply ends: the watcher's subscription ends too.
	bus.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, ok := sub.Next(ctx); ok {
		t.Fatal("subscription still open after the bus closed")
	}
	if ctx.Err() != nil {
		t.Fatal("subscription did not end when the bus closed")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket file left behind: %v", err)
	}
}

func TestServeRefusesToDeleteARegularFile(t *testing.T) {
	path := shortSockPath(t)
	if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(context.Background(), path, NewBus(), ServeOptions{}); err == nil {
		t.Fatal("Serve replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Fatal("regular file was changed")
	}
}

func TestServeStopsOnContextCancel(t *testing.T) {
	path := shortSockPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Serve(ctx, path, NewBus(), ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub := dial(t, path)
	cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.Close() }()
	wg.Wait()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, ok := sub.Next(ctx2); ok || ctx2.Err() != nil {
		t.Fatal("client not disconnected when the server's context ended")
	}
}

// The server unsubscribes a client's queue while the pump publishes to it;
// that must not panic with a send on a closed channel (go test -race
// reports the unfixed version reliably).
func TestUnsubscribeWhilePublishing(t *testing.T) {
	bus := NewBus()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				bus.Publish(Event{Type: AttemptStarted})
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		bus.Subscribe().Unsubscribe()
	}
	close(stop)
	wg.Wait()
}
