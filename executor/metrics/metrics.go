// Package metrics turns the event stream of a run into the Prometheus
// metrics of SPEC §9. It is one more view of executor/event: it follows a
// bus subscription, so it can never block the executor, and it is fed the
// same way by wf apply and (later) wf worker.
//
// The wf_* families are kept in compact per-activity structures rather than
// client_golang vectors: a scrape of a run with 10,000 activities must take
// well under 50 ms, and the generic Gather-then-encode path takes about a
// second for that many series. *Metrics is still a prometheus.Collector
// (Describe, Collect), so it can be registered in any registry; Handler
// and WriteText use a direct text encoder of the same data, and a test
// checks that both say the same. Go runtime and process metrics come from
// client_golang's collectors, in a private registry: nothing here touches
// the global registry.
package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wf-engine/wf/executor/event"
)

// Options configures Metrics.
type Options struct {
	// Now is the clock that budget windows are read with at scrape time;
	// time.Now when nil.
	Now func() time.Time
	// NoRuntime leaves the Go runtime and process collectors out of the
	// Handler (tests that compare whole scrapes).
	NoRuntime bool
}

// Metrics holds the metrics of one run (or one worker). Its methods are
// safe for concurrent use.
type Metrics struct {
	now     func() time.Time
	runtime *prometheus.Registry
	descs   descs

	mu sync.Mutex
	st state
	// done is closed when Follow returns.
	done     chan struct{}
	doneOnce sync.Once
}

// New returns empty metrics; feed them with Follow or Observe.
func New(opts Options) *Metrics {
	m := &Metrics{
		now:     opts.Now,
		runtime: prometheus.NewRegistry(),
		descs:   newDescs(),
		st:      newState(),
		done:    make(chan struct{}),
	}
	if m.now == nil {
		m.now = time.Now
	}
	if !opts.NoRuntime {
		m.runtime.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	return m
}

// Start returns metrics that follow sub in their own goroutine until the
// bus closes or ctx is done; Wait waits for that. This is what wf apply
// and wf worker use: subscribe before the run starts, serve Handler.
func Start(ctx context.Context, sub *event.Subscription, opts Options) *Metrics {
	m := New(opts)
	go m.Follow(ctx, sub)
	return m
}

// followEvery paces Follow: after a batch it lets events queue for this
// long before taking the next, so that a retry storm's thousands of small
// publications wake it a few dozen times a second, not thousands. Metrics
// are then at most this much behind the run, well inside any scrape
// interval.
const followEvery = 25 * time.Millisecond

// Follow applies every batch of sub until the bus is closed and drained, or
// ctx is done; then it applies what is already queued, at once, and
// returns (cancel ctx after closing the bus to stop without the pacing
// delay). It holds the lock only while applying a batch.
func (m *Metrics) Follow(ctx context.Context, sub *event.Subscription) {
	defer m.doneOnce.Do(func() { close(m.done) })
	pause := time.NewTimer(followEvery)
	defer pause.Stop()
	for {
		batch, ok := sub.Next(ctx)
		if !ok {
			return
		}
		m.Observe(batch)
		pause.Reset(followEvery)
		select {
		case <-pause.C:
		case <-ctx.Done():
			for {
				// Next returns what is queued before it looks at ctx.
				batch, ok := sub.Next(ctx)
				if !ok {
					return
				}
				m.Observe(batch)
			}
		}
	}
}

// Wait returns once Follow has returned: every event published before the
// bus closed is counted.
func (m *Metrics) Wait() { <-m.done }

// Done is closed when Follow has returned.
func (m *Metrics) Done() <-chan struct{} { return m.done }

// Observe applies a batch of events in order.
func (m *Metrics) Observe(batch []event.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range batch {
		m.st.apply(&batch[i])
	}
}

// Register adds a collector to what Handler serves besides the wf_*
// metrics (wf worker adds the Temporal SDK's, for example).
func (m *Metrics) Register(c prometheus.Collector) error {
	return m.runtime.Register(c)
}
