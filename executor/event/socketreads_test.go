package event

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// countTo answers op "count" with the numbers 1..args.n, and op "fail"
// with an error.
func countTo(ctx context.Context, op string, args json.RawMessage, emit func(any) error) error {
	switch op {
	case "count":
		var a struct{ N int }
		if err := json.Unmarshal(args, &a); err != nil {
			return err
		}
		for i := 1; i <= a.N; i++ {
			if err := emit(map[string]int{"i": i}); err != nil {
				return err
			}
		}
		return nil
	case "fail":
		return errors.New("no such thing")
	}
	return fmt.Errorf("unknown op %q", op)
}

func readAll(t *testing.T, r *Reads, op string, n int) ([]int, error) {
	t.Helper()
	var got []int
	err := r.Read(op, map[string]int{"n": n}, func(item json.RawMessage) error {
		var v struct{ I int }
		if err := json.Unmarshal(item, &v); err != nil {
			return err
		}
		got = append(got, v.I)
		return nil
	})
	return got, err
}

// TestReadsAnswerInOrderAndNeverSeeEvents: a reader gets its answers, item
// by item and request after request on one connection, and no event, while
// a watcher on the same socket gets every event.
func TestReadsAnswerInOrderAndNeverSeeEvents(t *testing.T) {
	bus := NewBus()
	path := serve(t, bus, ServeOptions{OnRead: countTo})
	watcher := dial(t, path)
	for i := 1; i <= 50; i++ {
		bus.Publish(Event{Type: AttemptFailed, Instance: "w/k", Activity: "activity.a", Attempt: i})
	}
	r, err := DialReads(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, n := range []int{3, 0, 20000} {
		got, err := readAll(t, r, "count", n)
		if err != nil {
			t.Fatalf("count %d: %v", n, err)
		}
		if len(got) != n || (n > 0 && (got[0] != 1 || got[n-1] != n)) {
			t.Fatalf("count %d: got %d items", n, len(got))
		}
		bus.Publish(Event{Type: AttemptStarted, Instance: "w/k", Activity: "activity.a", Attempt: 51})
	}
	if _, err := readAll(t, r, "fail", 0); err == nil || !strings.Contains(err.Error(), "no such thing") {
		t.Fatalf("fail: %v", err)
	}
	// The connection still answers after an error.
	if got, err := readAll(t, r, "count", 2); err != nil || len(got) != 2 {
		t.Fatalf("after an error: %v %v", got, err)
	}
	if evs := collect(t, watcher, 53); evs[52].Attempt != 51 {
		t.Fatalf("watcher's last event %+v", evs[52])
	}
}

// TestSilentClientIsAWatcher: a client that says nothing (a wf watch from
// before the handshake) still gets the snapshot and the live events.
func TestSilentClientIsAWatcher(t *testing.T) {
	bus := NewBus()
	path := serve(t, bus, ServeOptions{OnRead: countTo})
	bus.Publish(Event{Type: Plan, Instance: "w/k"})
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, `"type":"plan"`) {
		t.Fatalf("first line %q, %v", line, err)
	}
}

// TestReadsWithoutHandler: a server without OnRead answers with
// ErrReadsUnsupported's reason; a server that takes the reader for a
// watcher (an older wf) is detected as such.
func TestReadsWithoutHandler(t *testing.T) {
	bus := NewBus()
	path := serve(t, bus, ServeOptions{})
	r, err := DialReads(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := readAll(t, r, "count", 1); err == nil || !strings.Contains(err.Error(), "does not answer reads") {
		t.Fatalf("err %v", err)
	}

	// An old server: it streams events at whoever connects.
	ln, err := net.Listen("unix", shortSockPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			fmt.Fprintln(c, `{"seq":1,"type":"plan","instance":"w/k"}`)
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	old, err := DialReads(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := readAll(t, old, "count", 1); !errors.Is(err, ErrReadsUnsupported) {
		t.Fatalf("old server: %v, want ErrReadsUnsupported", err)
	}
}

// TestReaderThatHangsUpDoesNotBlock: a reader that goes away mid-answer
// ends the answer (emit fails) and the server goes on; shutting the
// server down ends a reader that is waiting.
func TestReaderThatHangsUpDoesNotBlock(t *testing.T) {
	bus := NewBus()
	ended := make(chan error, 1)
	path := serve(t, bus, ServeOptions{OnRead: func(ctx context.Context, op string, args json.RawMessage, emit func(any) error) error {
		big := strings.Repeat("x", 1<<10)
		for {
			if err := emit(big); err != nil {
				ended <- err
				return err
			}
		}
	}})
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(conn, `{"read":{"id":1,"op":"forever"}}`)
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the answer went on after the reader hung up")
	}
	// The socket still serves.
	r, err := DialReads(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	path2 := shortSockPath(t)
	srv, err := Serve(context.Background(), path2, NewBus(), ServeOptions{OnRead: countTo})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := DialReads(context.Background(), path2)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := readAll(t, idle, "count", 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for an idle reader")
	}
	if _, err := readAll(t, idle, "count", 1); !errors.Is(err, ErrNoApply) {
		t.Fatalf("read after the apply stopped: %v, want ErrNoApply", err)
	}
}
