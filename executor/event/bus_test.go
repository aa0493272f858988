package event

import (
	"context"
	"testing"
	"time"
)

func TestBusDeliversInOrderAndBatches(t *testing.T) {
	b := NewBus()
	s := b.Subscribe()
	for i := 1; i <= 100; i++ {
		b.Publish(Event{Type: AttemptStarted, Attempt: i})
	}
	b.Close()
	var got []int
	for {
		batch, ok := s.Next(context.Background())
		if !ok {
			break
		}
		for _, e := range batch {
			got = append(got, e.Attempt)
		}
	}
	if len(got) != 100 {
		t.Fatalf("got %d events, want 100", len(got))
	}
	for i, a := range got {
		if a != i+1 {
			t.Fatalf("event %d has attempt %d: out of order", i, a)
		}
	}
}

func TestPublishDoesNotBlockOnSlowSubscriber(t *testing.T) {
	b := NewBus()
	_ = b.Subscribe() // never read
	done := make(chan struct{})
	go func() {
		for i := 0; i < 100000; i++ {
			b.Publish(Event{Type: AttemptStarted})
		}
		close(done)
	}()
	// Only a hang may exceed this bound: 100000 publishes under the race
	// detector on a loaded 2-core machine can take several seconds.
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Publish blocked on a subscriber that never reads")
	}
}

func TestNextHonoursContext(t *testing.T) {
	b := NewBus()
	s := b.Subscribe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, ok := s.Next(ctx); ok {
		t.Fatal("Next returned ok with nothing published")
	}
}

func TestUnsubscribeStopsDelivery(t *testing.T) {
	b := NewBus()
	s := b.Subscribe()
	s.Unsubscribe()
	b.Publish(Event{Type: Plan})
	if _, ok := s.Next(context.Background()); ok {
		t.Fatal("unsubscribed subscription still received events")
	}
}
