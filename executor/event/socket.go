package event

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"syscall"
)

// ErrNoApply is returned by Dial when no apply serves the socket.
var ErrNoApply = errors.New("no wf apply is running on this state")

// ErrNotRemote is returned by Subscription.FireNow on a subscription that
// does not come from Dial.
var ErrNotRemote = errors.New("subscription is not connected to an apply")

// DefaultHistory is how many events (besides the plan events) a server
// keeps for clients that connect late.
const DefaultHistory = 10000

// maxLine bounds one JSON line on the socket. A plan event lists every
// activity of an instance, so it can be large.
const maxLine = 64 << 20

// ServeOptions configures Serve.
type ServeOptions struct {
	// OnFireNow is called (from a connection's goroutine) when a client asks
	// to fire an activity's pending retry now. Nil ignores such requests.
	OnFireNow func(instance, activity string)
	// History is the number of non-plan events replayed to a client that
	// connects late; 0 means DefaultHistory.
	History int
}

// clientMsg is a line a client sends to the server.
type clientMsg struct {
	FireNow *fireNowCmd `json:"fire_now,omitempty"`
}

type fireNowCmd struct {
	Instance string `json:"instance"`
	Activity string `json:"activity"`
}

// server streams a bus over a Unix socket.
type server struct {
	path string
	ln   net.Listener
	opts ServeOptions
	sub  *Subscription // the server's own subscription to the run's bus
	fan  *Bus          // one subscription per client; Publish never blocks

	mu      sync.Mutex
	plans   []Event        // latest plan event per instance, in first-seen order
	planIdx map[string]int // instance -> index in plans
	ring    []Event        // last opts.History non-plan events
	start   int            // index of the oldest event in ring once full
	conns   map[net.Conn]struct{}
	closed  bool

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Serve listens on a Unix socket at path and streams every event published
// on bus to each client as JSON lines. A client first receives a replay of
// the latest plan event of every instance and the last events (see
// ServeOptions.History), then everything published after it connected. Each
// client drains its own unbounded queue, so a slow or vanished client never
// blocks the bus or other clients. A stale socket file at path is removed
// first; the socket is made private to the user (mode 0600).
//
// Closing the returned io.Closer (or cancelling ctx) stops the server,
// disconnects every client and removes the socket file. When the bus is
// closed, clients receive the remaining events and are then disconnected.
func Serve(ctx context.Context, path string, bus *Bus, opts ServeOptions) (io.Closer, error) {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on event socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("restrict event socket %s: %w", path, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &server{
		path:    path,
		ln:      ln,
		opts:    opts,
		sub:     bus.Subscribe(),
		fan:     NewBus(),
		planIdx: map[string]int{},
		conns:   map[net.Conn]struct{}{},
		cancel:  cancel,
	}
	s.wg.Add(3)
	go s.pump(ctx)
	go s.accept(ctx)
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		s.shutdown()
	}()
	return s, nil
}

// removeStaleSocket deletes a socket file left by an apply that died. Any
// other kind of file is left alone: it is not ours to delete.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect event socket %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("event socket %s: a file that is not a socket is in the way", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale event socket %s: %w", path, err)
	}
	return nil
}

// pump records history and forwards batches to the clients. History and
// fan-out happen under one lock so that a client connecting concurrently
// sees every event exactly once: either in its replay or live.
func (s *server) pump(ctx context.Context) {
	defer s.wg.Done()
	defer s.fan.Close()
	for {
		batch, ok := s.sub.Next(ctx)
		if !ok {
			return
		}
		s.mu.Lock()
		for _, ev := range batch {
			s.record(ev)
		}
		s.fan.Publish(batch...)
		s.mu.Unlock()
	}
}

// record adds ev to the bounded history; s.mu is held.
func (s *server) record(ev Event) {
	if ev.Type == Plan {
		if i, ok := s.planIdx[ev.Instance]; ok {
			s.plans[i] = ev
		} else {
			s.planIdx[ev.Instance] = len(s.plans)
			s.plans = append(s.plans, ev)
		}
		return
	}
	if len(s.ring) < s.opts.History {
		s.ring = append(s.ring, ev)
		return
	}
	s.ring[s.start] = ev
	s.start = (s.start + 1) % len(s.ring)
}

// snapshot returns the replay for a new client; s.mu is held.
func (s *server) snapshot() []Event {
	out := make([]Event, 0, len(s.plans)+len(s.ring))
	out = append(out, s.plans...)
	out = append(out, s.ring[s.start:]...)
	out = append(out, s.ring[:s.start]...)
	return out
}

func (s *server) accept(ctx context.Context) {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return // listener closed by shutdown
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		replay := s.snapshot()
		sub := s.fan.Subscribe()
		s.conns[conn] = struct{}{}
		s.wg.Add(2)
		s.mu.Unlock()
		go s.write(ctx, conn, replay, sub)
		go s.read(conn)
	}
}

// write sends the replay and then the live events to one client. It
// returns (and drops the client) on the first write error.
func (s *server) write(ctx context.Context, conn net.Conn, replay []Event, sub *Subscription) {
	defer s.wg.Done()
	defer s.drop(conn)
	defer sub.Unsubscribe()
	w := bufio.NewWriter(conn)
	enc := json.NewEncoder(w)
	send := func(evs []Event) error {
		for i := range evs {
			if err := enc.Encode(&evs[i]); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	if send(replay) != nil {
		return
	}
	for {
		batch, ok := sub.Next(ctx)
		if !ok {
			return
		}
		if send(batch) != nil {
			return
		}
	}
}

// read handles the commands a client sends. Unknown or malformed lines are
// ignored: a watcher of another version must not break the apply.
func (s *server) read(conn net.Conn) {
	defer s.wg.Done()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var m clientMsg
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.FireNow == nil {
			continue
		}
		if s.opts.OnFireNow != nil {
			s.opts.OnFireNow(m.FireNow.Instance, m.FireNow.Activity)
		}
	}
	// The client hung up: stop writing to it as well.
	s.drop(conn)
}

func (s *server) drop(conn net.Conn) {
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
	_ = conn.Close()
}

func (s *server) shutdown() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]net.Conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		_ = s.ln.Close()
		s.sub.Unsubscribe()
		for _, c := range conns {
			_ = c.Close()
		}
		// The listener removes its socket file on Close; this covers the
		// case where it could not.
		_ = os.Remove(s.path)
	})
}

// Close stops the server and waits for its goroutines.
func (s *server) Close() error {
	s.cancel()
	s.shutdown()
	s.wg.Wait()
	return nil
}

// Dial connects to the event socket of a running apply and returns a
// subscription fed from it: first the replay of what happened so far, then
// live events. The subscription ends when the apply ends, the connection
// drops or ctx is done. A missing socket or a refused connection returns an
// error wrapping ErrNoApply.
func Dial(ctx context.Context, path string) (*Subscription, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) ||
			errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("dial %s: %w: %w", path, ErrNoApply, err)
		}
		return nil, fmt.Errorf("dial event socket %s: %w", path, err)
	}
	local := NewBus()
	sub := local.Subscribe()
	var wmu sync.Mutex
	sub.fireNow = func(instance, activity string) error {
		line, err := json.Marshal(clientMsg{FireNow: &fireNowCmd{Instance: instance, Activity: activity}})
		if err != nil {
			return fmt.Errorf("encode fire_now: %w", err)
		}
		wmu.Lock()
		defer wmu.Unlock()
		if _, err := conn.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("send fire_now: %w", err)
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		_ = conn.Close()
	}()
	go func() {
		defer close(done)
		defer local.Close()
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 0, 64<<10), maxLine)
		for sc.Scan() {
			var ev Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				continue // a line this version does not understand
			}
			local.Publish(ev)
		}
	}()
	return sub, nil
}

// FireNow asks the apply behind a subscription returned by Dial to fire the
// activity's pending retry now. Other subscriptions return ErrNotRemote.
func (s *Subscription) FireNow(instance, activity string) error {
	if s.fireNow == nil {
		return ErrNotRemote
	}
	return s.fireNow(instance, activity)
}
