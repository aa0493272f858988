package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// family is one wf_* metric family of SPEC §9: its name, help, type and
// variable labels. Handler and Collect both describe families from here.
type family struct {
	name, help, typ string
	labels          []string
}

// The families, in the order they are written (alphabetical).
var (
	famActivities = family{"wf_activities_total", "Activities that ended, by status (succeeded, failed, skipped) and reason.", "counter", []string{"workflow", "activity", "status", "reason"}}
	famDuration   = family{"wf_attempt_duration_seconds", "How long attempts took, from start to end (interrupted attempts are not timed).", "histogram", []string{"workflow", "activity"}}
	famAttempts   = family{"wf_attempts_total", "Attempts that ended, by outcome (succeeded, failed, interrupted).", "counter", []string{"workflow", "activity", "outcome"}}
	famExhausted  = family{"wf_budget_exhausted_total", "Retries a retry budget refused, by what followed (wait or fail).", "counter", []string{"budget", "on_exhausted"}}
	famInWindow   = family{"wf_budget_retries_in_window", "Retries a retry budget granted in its sliding window.", "gauge", []string{"budget"}}
	famUsage      = family{"wf_budget_usage_ratio", "Retries in a retry budget's window divided by its max_retries.", "gauge", []string{"budget"}}
	famCircuit    = family{"wf_circuit_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open.", "gauge", []string{"breaker"}}
	famBeats      = family{"wf_heartbeats_total", "Heartbeats that running exec attempts wrote to $WF_HEARTBEAT_FILE.", "counter", []string{"workflow", "activity"}}
	famPending    = family{"wf_pending_timers", "Durable timers recorded and not yet consumed (retry, budget and sleep timers).", "gauge", nil}
	famRetries    = family{"wf_retries_total", "Retries started, by the error type of the attempt they retry.", "counter", []string{"workflow", "activity", "error_type"}}
	famDelay      = family{"wf_retry_delay_seconds", "The wait chosen before a retry (backoff, the server's Retry-After, or the budget's).", "histogram", []string{"workflow", "activity"}}
	famRunning    = family{"wf_running_attempts", "Exec and http attempts running now.", "gauge", nil}
	famLateness   = family{"wf_timer_lateness_seconds", "How late timers fired: from the recorded fire time to the start of the retry (or the end of the sleep).", "histogram", nil}
)

var allFamilies = []family{famActivities, famDuration, famAttempts, famExhausted, famInWindow,
	famUsage, famCircuit, famBeats, famPending, famRetries, famDelay, famRunning, famLateness}

type descs struct {
	activities, duration, attempts, exhausted, inWindow, usage, circuit, beats,
	pending, retries, delay, running, lateness *prometheus.Desc
}

func (f family) desc() *prometheus.Desc {
	return prometheus.NewDesc(f.name, f.help, f.labels, nil)
}

func newDescs() descs {
	return descs{
		activities: famActivities.desc(), duration: famDuration.desc(), attempts: famAttempts.desc(),
		exhausted: famExhausted.desc(), inWindow: famInWindow.desc(), usage: famUsage.desc(),
		circuit: famCircuit.desc(), beats: famBeats.desc(), pending: famPending.desc(), retries: famRetries.desc(),
		delay: famDelay.desc(), running: famRunning.desc(), lateness: famLateness.desc(),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	d := m.descs
	for _, x := range []*prometheus.Desc{d.activities, d.duration, d.attempts, d.exhausted, d.inWindow,
		d.usage, d.circuit, d.beats, d.pending, d.retries, d.delay, d.running, d.lateness} {
		ch <- x
	}
}

// Collect implements prometheus.Collector: the same values as WriteText,
// through client_golang's generic path (slower; see the package comment).
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	d, s := m.descs, &m.st
	counter := func(desc *prometheus.Desc, n uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(n), lv...)
	}
	gauge := func(desc *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, lv...)
	}
	histogram := func(desc *prometheus.Desc, upper []float64, h *hist, lv ...string) {
		buckets := make(map[float64]uint64, len(upper))
		var cum uint64
		for i, u := range upper {
			if h.counts != nil {
				cum += h.counts[i]
			}
			buckets[u] = cum
		}
		ch <- prometheus.MustNewConstHistogram(desc, h.n, h.sum, buckets, lv...)
	}
	for _, a := range s.sorted() {
		wf, act := clean(a.workflow), clean(a.activity)
		for _, e := range a.ends {
			counter(d.activities, e.n, wf, act, clean(e.value), clean(e.extra))
		}
		if a.duration.n > 0 {
			histogram(d.duration, durationBuckets, &a.duration, wf, act)
		}
		for o, n := range a.attempts {
			counter(d.attempts, n, wf, act, outcomeNames[o])
		}
		for _, r := range a.retries {
			counter(d.retries, r.n, wf, act, clean(r.value))
		}
		if a.delay.n > 0 {
			histogram(d.delay, delayBuckets, &a.delay, wf, act)
		}
		if a.heartbeats > 0 {
			counter(d.beats, a.heartbeats, wf, act)
		}
	}
	for _, b := range s.bOrder {
		name := clean(b.name)
		for i, seen := range b.seenExhausted {
			if seen {
				counter(d.exhausted, b.exhausted[i], name, exhaustedNames[i])
			}
		}
		used := b.usedAt(now)
		gauge(d.inWindow, float64(used), name)
		gauge(d.usage, b.ratio(used), name)
	}
	for _, c := range s.cOrder {
		gauge(d.circuit, c.state, clean(c.name))
	}
	gauge(d.pending, float64(s.pending))
	gauge(d.running, float64(s.running))
	histogram(d.lateness, latenessBuckets, &s.lateness)
}
