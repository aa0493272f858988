package tui

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/wf-engine/wf/executor/event"
)

// retryStorm is n activities each failing `per` times: attempt_started,
// attempt_failed and retry_scheduled per failure.
func retryStorm(n, per int) []event.Event {
	evs := manyActivities(n)
	for a := 0; a < n; a++ {
		name := fmt.Sprintf("step_%04d", a)
		s := &scenario{}
		for i := 1; i <= per; i++ {
			off := time.Duration(i) * 10 * time.Millisecond
			s.started(off, name, i)
			s.failed(off, name, i, "http:503", "unavailable")
			s.retry(off, name, i+1, time.Second)
		}
		evs = append(evs, s.evs...)
	}
	return evs
}

// consume runs a model over sub the way Run does (a batch per message,
// one render per batch) and reports how long it took once the bus closes.
func consume(sub *event.Subscription, m *Model) (applied int, renders int) {
	for {
		batch, ok := sub.Next(context.Background())
		if !ok {
			return applied, renders
		}
		m.Update(EventsMsg{Events: batch})
		_ = m.Render()
		applied += len(batch)
		renders++
	}
}

// BenchmarkRetryStorm publishes 20,000 events (1,000 activities, about 7
// retries each) while a model consumes them, and reports the slowest
// Publish call and the time the model needed to apply everything.
func BenchmarkRetryStorm(b *testing.B) {
	evs := retryStorm(1000, 7) // 1 plan + 1000*7*3 = 21,001 events
	var maxPublish, total time.Duration
	lat := make([]time.Duration, 0, len(evs))
	for b.Loop() {
		bus := event.NewBus()
		sub := bus.Subscribe()
		m := NewModel(Options{Now: newClock(at(time.Second)).Now})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		done := make(chan int)
		start := time.Now()
		go func() {
			n, _ := consume(sub, m)
			done <- n
		}()
		for i := range evs {
			t := time.Now()
			bus.Publish(evs[i])
			d := time.Since(t)
			maxPublish = max(maxPublish, d)
			lat = append(lat, d)
		}
		bus.Close()
		if n := <-done; n != len(evs) {
			b.Fatalf("model applied %d of %d events", n, len(evs))
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/20k-events")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1000, "p99-publish-µs")
	b.ReportMetric(float64(maxPublish.Microseconds()), "max-publish-µs")
	b.ReportMetric(0, "ns/op")
}

// TestRetryStormPublishNeverBlocks is the pass/fail form of the benchmark:
// the publisher must finish while the model is still far behind, and the
// model must end up with every row in its final state.
func TestRetryStormPublishNeverBlocks(t *testing.T) {
	evs := retryStorm(1000, 7)
	bus := event.NewBus()
	sub := bus.Subscribe()
	m := NewModel(Options{Now: newClock(at(time.Second)).Now})
	release := make(chan struct{})
	done := make(chan int)
	go func() {
		<-release // a model stuck in a slow frame
		n, _ := consume(sub, m)
		done <- n
	}()
	published := make(chan struct{})
	go func() {
		for i := range evs {
			bus.Publish(evs[i])
		}
		bus.Close()
		close(published)
	}()
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish blocked while the model was not consuming")
	}
	close(release)
	if n := <-done; n != len(evs) {
		t.Fatalf("model applied %d of %d events", n, len(evs))
	}
	if len(m.rows) != 1000 || m.attempts != 7000 || m.retries != 6000 {
		t.Fatalf("rows %d attempts %d retries %d", len(m.rows), m.attempts, m.retries)
	}
	for _, r := range m.rows {
		if r.st != stRetryWait || r.attempt != 7 || len(r.history) != 7 {
			t.Fatalf("row %s: status %d attempt %d history %d", r.activity, r.st, r.attempt, len(r.history))
		}
	}
}

// BenchmarkApplyBatch is the model's share alone: one 21,001-event batch
// folded into a fresh model, plus one frame.
func BenchmarkApplyBatch(b *testing.B) {
	evs := retryStorm(1000, 7)
	for b.Loop() {
		m := NewModel(Options{Now: newClock(at(time.Second)).Now})
		m.Update(EventsMsg{Events: evs})
		_ = m.Render()
	}
	b.ReportMetric(float64(len(evs)), "events/op")
}
