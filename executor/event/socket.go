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
	"time"
)

// ErrNoApply is returned by Dial when no apply serves the socket.
var ErrNoApply = errors.New("no wf apply is running on this state")

// ErrNotRemote is returned by Subscription.FireNow on a subscription that
// does not come from Dial.
var ErrNotRemote = errors.New("subscription is not connected to an apply")

// DefaultHistory is how many events (besides the plan events) a server
// keeps for clients that connect late or fall behind.
const DefaultHistory = 10000

// Bounds of what the server holds, when ServeOptions leaves them zero.
const (
	// DefaultHistoryBytes bounds the recent events kept, by encoded size.
	DefaultHistoryBytes = 8 << 20
	// DefaultClientQueueEvents and DefaultClientQueueBytes bound what one
	// watcher can have queued before its backlog is dropped for a fresh
	// snapshot: a watcher that stops reading costs this much, no more.
	DefaultClientQueueEvents = 1024
	DefaultClientQueueBytes  = 512 << 10
)

// maxLine bounds one JSON line on the socket. A plan event lists every
// activity of an instance, so it can be large.
const maxLine = 64 << 20

// ServeOptions configures Serve.
type ServeOptions struct {
	// OnFireNow is called (from a connection's goroutine) when a client asks
	// to fire an activity's pending retry now. Nil ignores such requests.
	OnFireNow func(instance, activity string)
	// OnRead answers the read requests of clients connected with
	// DialReads (the reading commands while the apply holds the state).
	// Nil answers every request with ErrReadsUnsupported's message.
	OnRead ReadFunc
	// History is the number of recent non-plan events replayed to a client
	// that connects late or falls behind; 0 means DefaultHistory.
	History int
	// HistoryBytes bounds the same events by encoded size; 0 means
	// DefaultHistoryBytes.
	HistoryBytes int
	// ClientQueueEvents and ClientQueueBytes bound one client's queue; 0
	// means DefaultClientQueueEvents and DefaultClientQueueBytes.
	ClientQueueEvents int
	ClientQueueBytes  int
}

// clientMsg is a line a client sends to the server. A connection's first
// line says what the client is: a watcher ({"watch":{}}, which Dial sends)
// or a reader (a "read" request, see DialReads). A client that says
// nothing within watchGrace is a watcher of an older wf.
type clientMsg struct {
	Watch   *struct{}   `json:"watch,omitempty"`
	FireNow *fireNowCmd `json:"fire_now,omitempty"`
	Read    *readReq    `json:"read,omitempty"`
}

// watchGrace is how long the server waits for a client's first line
// before it takes the client for a watcher that does not say so (a wf
// watch from before readers).
const watchGrace = 200 * time.Millisecond

type fireNowCmd struct {
	Instance string `json:"instance"`
	Activity string `json:"activity"`
}

// wireEvent is an event on the socket: its -json encoding plus a sequence
// number ("seq", from 1, increasing), by which a client drops the events it
// already has when the server sends it a fresh snapshot. Clients that do
// not know the field ignore it.
type wireEvent struct {
	Seq uint64 `json:"seq"`
	Event
}

// server streams a bus over a Unix socket.
type server struct {
	path string
	ln   net.Listener
	opts ServeOptions
	sub  *Subscription // the server's own subscription to the run's bus

	mu      sync.Mutex
	seq     uint64
	hist    *history
	clients map[*client]net.Conn
	// pending are connections that have not said yet what they are, and
	// readers: closed at shutdown like the watchers.
	pending map[net.Conn]struct{}
	ended   bool // the bus is closed: the run is over
	closed  bool // shut down

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Serve listens on a Unix socket at path and streams every event published
// on bus to each client as JSON lines. A client first receives a snapshot:
// the latest plan event of every instance, the latest event of every
// activity and the recent events (see ServeOptions.History), in the order
// they happened; then everything published after it connected.
//
// The socket can be reached only by its owner from the moment it exists:
// it is bound inside a private (0700) directory next to path, made 0600
// there and only then renamed to path. A stale socket at path is replaced;
// any other kind of file there is an error (it is never followed).
//
// Each client has its own bounded queue (ServeOptions.ClientQueueEvents and
// ClientQueueBytes), so a client that reads slowly or not at all never
// blocks the bus or other clients and costs at most that queue. When the
// queue overflows its backlog is dropped, and once the client reads again
// it is sent a fresh snapshot, after which it goes on live; Dial drops the
// events of the snapshot the client already has (by seq), so a view fed by
// Dial just carries on, minus what fell out of the history meanwhile.
//
// Closing the returned io.Closer (or cancelling ctx) stops the server,
// disconnects every client and removes the socket file. When the bus is
// closed, clients receive the remaining events and are then disconnected.
func Serve(ctx context.Context, path string, bus *Bus, opts ServeOptions) (io.Closer, error) {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.HistoryBytes <= 0 {
		opts.HistoryBytes = DefaultHistoryBytes
	}
	if opts.ClientQueueEvents <= 0 {
		opts.ClientQueueEvents = DefaultClientQueueEvents
	}
	if opts.ClientQueueBytes <= 0 {
		opts.ClientQueueBytes = DefaultClientQueueBytes
	}
	ln, err := listenPrivate(ctx, path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &server{
		path:    path,
		ln:      ln,
		opts:    opts,
		sub:     bus.Subscribe(),
		hist:    newHistory(opts.History, opts.HistoryBytes),
		clients: map[*client]net.Conn{},
		pending: map[net.Conn]struct{}{},
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

// pump encodes each event once, records it in the history and queues it
// for every client, all under one lock, so that a client connecting or
// catching up concurrently sees every event exactly once: either in its
// snapshot or after it.
func (s *server) pump(ctx context.Context) {
	defer s.wg.Done()
	defer s.closeClients()
	for {
		batch, ok := s.sub.Next(ctx)
		if !ok {
			return
		}
		ls := make([]*line, 0, len(batch))
		s.mu.Lock()
		for i := range batch {
			ev := &batch[i]
			s.seq++
			data, err := json.Marshal(wireEvent{Seq: s.seq, Event: *ev})
			if err != nil {
				continue // an Event holds only JSON-safe values
			}
			l := &line{seq: s.seq, data: append(data, '\n'), key: ev.Instance + "\x00" + ev.Activity}
			s.hist.add(l, ev.Type == Plan, ev.Instance)
			ls = append(ls, l)
		}
		for c := range s.clients {
			c.push(ls)
		}
		s.mu.Unlock()
	}
}

// closeClients lets every client finish what it has and disconnect: the run
// is over.
func (s *server) closeClients() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	for c := range s.clients {
		c.close()
	}
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
		s.pending[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handshake(ctx, conn)
	}
}

// handshake reads a client's first line and serves it as what it says it
// is: a reader or a watcher.
func (s *server) handshake(ctx context.Context, conn net.Conn) {
	defer s.wg.Done()
	br := bufio.NewReaderSize(conn, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(watchGrace))
	first, err := br.ReadSlice('\n')
	var ne net.Error
	switch {
	case err == nil:
	case errors.As(err, &ne) && ne.Timeout() && len(first) == 0:
		// Silent: a watcher from before the handshake.
	case errors.As(err, &ne) && ne.Timeout():
		// A line on its way: read the rest of it.
		_ = conn.SetReadDeadline(time.Time{})
		rest, rerr := br.ReadSlice('\n')
		if rerr != nil {
			s.forget(conn)
			return
		}
		first = append(append([]byte(nil), first...), rest...)
	default:
		s.forget(conn) // hung up, or a line too long
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	var m clientMsg
	if len(first) > 0 {
		_ = json.Unmarshal(first, &m)
	}
	if m.Read != nil {
		s.serveReads(ctx, conn, br, m.Read)
		s.forget(conn)
		return
	}
	s.mu.Lock()
	delete(s.pending, conn)
	if s.closed {
		s.mu.Unlock()
		_ = conn.Close()
		return
	}
	c := newClient(s.opts.ClientQueueEvents, s.opts.ClientQueueBytes)
	if s.ended {
		c.close() // it gets the snapshot, then the run is over
	}
	replay := s.hist.snapshot()
	s.clients[c] = conn
	s.wg.Add(2)
	s.mu.Unlock()
	go s.write(ctx, c, conn, replay)
	s.handle(m)
	go s.read(c, conn, br)
}

// forget closes a connection that is not a watcher.
func (s *server) forget(conn net.Conn) {
	s.mu.Lock()
	delete(s.pending, conn)
	s.mu.Unlock()
	_ = conn.Close()
}

// write sends the snapshot and then the live events to one client, and a
// fresh snapshot whenever its backlog was dropped. It returns (and drops
// the client) on the first write error.
func (s *server) write(ctx context.Context, c *client, conn net.Conn, replay []*line) {
	defer s.wg.Done()
	defer s.drop(c)
	w := bufio.NewWriterSize(conn, 16<<10)
	send := func(ls []*line) error {
		for i, l := range ls {
			if _, err := w.Write(l.data); err != nil {
				return err
			}
			ls[i] = nil // a stalled client pins only what it has not been sent
		}
		return w.Flush()
	}
	if send(replay) != nil {
		return
	}
	for {
		ls, resync, ok := c.next(ctx)
		if !ok {
			return
		}
		if resync {
			s.mu.Lock()
			ls = s.hist.snapshot()
			c.caughtUp()
			s.mu.Unlock()
		}
		if send(ls) != nil {
			return
		}
	}
}

// read handles the commands a watcher sends. Unknown or malformed lines
// are ignored: a watcher of another version must not break the apply.
func (s *server) read(c *client, conn net.Conn, r io.Reader) {
	defer s.wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var m clientMsg
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		s.handle(m)
	}
	// The client hung up: stop writing to it as well.
	s.drop(c)
}

// handle carries out a watcher's command.
func (s *server) handle(m clientMsg) {
	if m.FireNow != nil && s.opts.OnFireNow != nil {
		s.opts.OnFireNow(m.FireNow.Instance, m.FireNow.Activity)
	}
}

func (s *server) drop(c *client) {
	s.mu.Lock()
	conn := s.clients[c]
	delete(s.clients, c)
	s.mu.Unlock()
	c.close()
	if conn != nil {
		_ = conn.Close()
	}
}

func (s *server) shutdown() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]net.Conn, 0, len(s.clients)+len(s.pending))
		for c, conn := range s.clients {
			c.close()
			conns = append(conns, conn)
		}
		for conn := range s.pending {
			conns = append(conns, conn)
		}
		s.mu.Unlock()
		_ = s.ln.Close()
		s.sub.Unsubscribe()
		for _, c := range conns {
			_ = c.Close()
		}
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
	// Say what this client is, so the server sends the snapshot at once.
	if _, err := conn.Write([]byte("{\"watch\":{}}\n")); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("dial %s: %w: %w", path, ErrNoApply, err)
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
		_ = readStream(conn, local.Publish)
	}()
	return sub, nil
}

// readStream decodes the server's JSON lines and publishes each event once:
// an event whose seq the client already has (a snapshot re-sent after the
// client fell behind repeats them) is dropped. Lines it does not understand
// are skipped: a server of another version must not break the watcher.
func readStream(r io.Reader, publish func(...Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var last uint64
	for sc.Scan() {
		var w wireEvent
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			continue
		}
		if w.Seq != 0 {
			if w.Seq <= last {
				continue
			}
			last = w.Seq
		}
		publish(w.Event)
	}
	return sc.Err()
}

// FireNow asks the apply behind a subscription returned by Dial to fire the
// activity's pending retry now. Other subscriptions return ErrNotRemote.
func (s *Subscription) FireNow(instance, activity string) error {
	if s.fireNow == nil {
		return ErrNotRemote
	}
	return s.fireNow(instance, activity)
}
