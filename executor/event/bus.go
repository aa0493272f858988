package event

import (
	"context"
	"sync"
)

// Bus fans events out to subscribers. Publish appends to each subscriber's
// queue and returns at once; each subscriber drains its queue in batches at
// its own pace, so a slow view coalesces many events into one batch instead
// of slowing the publisher. Queues are unbounded: a view sees every event.
type Bus struct {
	mu     sync.Mutex
	subs   []*Subscription
	closed bool
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{} }

// Subscription is one subscriber's queue.
type Subscription struct {
	bus    *Bus
	mu     sync.Mutex
	queue  []Event
	notify chan struct{} // capacity 1: "the queue is non-empty"
	closed bool
	// fireNow is set on subscriptions returned by Dial: it sends an
	// operator command back to the apply that serves the socket.
	fireNow func(instance, activity string) error
}

// Subscribe adds a subscriber that receives every event published after it.
func (b *Bus) Subscribe() *Subscription {
	s := &Subscription{bus: b, notify: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.closed = true
		close(s.notify)
		return s
	}
	b.subs = append(b.subs, s)
	return s
}

// Publish delivers events to every subscriber without blocking. The bus
// keeps evs: the caller must not modify the slice afterwards.
func (b *Bus) Publish(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	b.mu.Lock()
	subs := b.subs
	b.mu.Unlock()
	for _, s := range subs {
		s.push(evs)
	}
}

// Close ends every subscription once its queue has been drained.
func (b *Bus) Close() {
	b.mu.Lock()
	subs := b.subs
	b.subs = nil
	b.closed = true
	b.mu.Unlock()
	for _, s := range subs {
		s.close()
	}
}

func (s *Subscription) push(evs []Event) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if len(s.queue) == 0 {
		// Share the publisher's slice instead of copying it: events are
		// never modified after Publish, and the clipped capacity makes a
		// later append reallocate rather than write into shared memory.
		// A run that recovers 100,000 timers publishes them in one call.
		s.queue = evs[:len(evs):len(evs)]
	} else {
		s.queue = append(s.queue, evs...)
	}
	// Signal under the lock: close() may run concurrently (Unsubscribe),
	// and a send on the closed channel would panic. The send never blocks.
	select {
	case s.notify <- struct{}{}:
	default:
	}
	s.mu.Unlock()
}

func (s *Subscription) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.notify)
	}
}

// Next waits for events and returns everything queued so far as one batch.
// The batch may share memory with other subscribers: read it, never modify it.
// It returns ok=false once the bus is closed and the queue is drained, or
// when ctx is done.
func (s *Subscription) Next(ctx context.Context) (batch []Event, ok bool) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			batch, s.queue = s.queue, nil
			s.mu.Unlock()
			return batch, true
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// Unsubscribe removes the subscriber; pending events are dropped.
func (s *Subscription) Unsubscribe() {
	b := s.bus
	b.mu.Lock()
	for i, x := range b.subs {
		if x == s {
			b.subs = append(b.subs[:i:i], b.subs[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	s.close()
}
