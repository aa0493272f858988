package event

import (
	"context"
	"slices"
	"sync"
)

// line is one event as the socket sends it: encoded once, shared by the
// history and every client queue, never modified.
type line struct {
	seq  uint64
	data []byte // a JSON object and a newline
	// key is "instance\x00activity": the latest-per-activity index.
	key string
}

// history is what the server keeps to bring a client up to date: the
// latest plan event of every instance, the latest event of every activity,
// and the most recent events, bounded by count and bytes. It is guarded by
// the server's mutex.
type history struct {
	maxEvents, maxBytes int

	plans   []*line
	planIdx map[string]int // instance -> index in plans

	// ring holds the recent non-plan events from ring[head] on, oldest
	// first; bytes is their total size.
	ring  []*line
	head  int
	bytes int

	// latest is the last non-plan event per instance and activity, so a
	// snapshot says where every activity stands even after the event that
	// says it fell out of the ring. It grows with the configuration, not
	// with time.
	latest map[string]*line
}

func newHistory(maxEvents, maxBytes int) *history {
	return &history{maxEvents: maxEvents, maxBytes: maxBytes, planIdx: map[string]int{}, latest: map[string]*line{}}
}

func (h *history) add(l *line, isPlan bool, instance string) {
	if isPlan {
		if i, ok := h.planIdx[instance]; ok {
			h.plans[i] = l
		} else {
			h.planIdx[instance] = len(h.plans)
			h.plans = append(h.plans, l)
		}
		return
	}
	h.latest[l.key] = l
	h.ring = append(h.ring, l)
	h.bytes += len(l.data)
	for len(h.ring)-h.head > 1 && (len(h.ring)-h.head > h.maxEvents || h.bytes > h.maxBytes) {
		h.bytes -= len(h.ring[h.head].data)
		h.ring[h.head] = nil
		h.head++
	}
	if h.head > 1024 && h.head > len(h.ring)/2 {
		n := copy(h.ring, h.ring[h.head:])
		clear(h.ring[n:])
		h.ring, h.head = h.ring[:n], 0
	}
}

// snapshot returns, in sequence order, everything a client needs to
// rebuild its view: the plans, the latest event of every activity whose
// last word fell out of the ring, and the ring.
func (h *history) snapshot() []*line {
	recent := h.ring[h.head:]
	oldest := ^uint64(0)
	if len(recent) > 0 {
		oldest = recent[0].seq
	}
	out := make([]*line, 0, len(h.plans)+len(recent)+8)
	out = append(out, h.plans...)
	for _, l := range h.latest {
		if l.seq < oldest {
			out = append(out, l)
		}
	}
	out = append(out, recent...)
	slices.SortFunc(out, func(a, b *line) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out
}

// client is one connected watcher's queue. It is bounded by events and by
// bytes: when a watcher stops reading and the queue overflows, the backlog
// is dropped and the client is marked behind; once its writer gets through
// again it sends a fresh snapshot instead (see server.write), so a stalled
// watcher costs at most one queue, never the whole run.
type client struct {
	mu     sync.Mutex
	queue  []*line
	bytes  int
	behind bool
	closed bool
	notify chan struct{} // capacity 1: "something to do"

	maxEvents, maxBytes int
}

func newClient(maxEvents, maxBytes int) *client {
	return &client{notify: make(chan struct{}, 1), maxEvents: maxEvents, maxBytes: maxBytes}
}

// push queues ls; the server's mutex is held, so a snapshot taken under it
// and the queue never overlap.
func (c *client) push(ls []*line) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	// When behind, the snapshot it will get covers ls.
	if !c.behind {
		for _, l := range ls {
			c.queue = append(c.queue, l)
			c.bytes += len(l.data)
		}
		if len(c.queue) > c.maxEvents || c.bytes > c.maxBytes {
			clear(c.queue)
			c.queue, c.bytes, c.behind = nil, 0, true
		}
	}
	c.signal()
}

func (c *client) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// close lets the writer send what is queued and stop.
func (c *client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.signal()
}

// next waits for work: the queued lines, or resync when the backlog was
// dropped. ok is false when the client is closed and has nothing left, or
// when ctx is done.
func (c *client) next(ctx context.Context) (ls []*line, resync, ok bool) {
	for {
		c.mu.Lock()
		switch {
		case c.behind:
			c.mu.Unlock()
			return nil, true, true
		case len(c.queue) > 0:
			ls, c.queue, c.bytes = c.queue, nil, 0
			c.mu.Unlock()
			return ls, false, true
		case c.closed:
			c.mu.Unlock()
			return nil, false, false
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-ctx.Done():
			return nil, false, false
		}
	}
}

// caughtUp clears the behind mark once a snapshot has been taken; the
// server's mutex is held, so nothing published after the snapshot is lost.
func (c *client) caughtUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.queue)
	c.queue, c.bytes, c.behind = nil, 0, false
}
