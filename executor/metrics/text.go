package metrics

import (
	"io"
	"math"
	"strconv"
	"sync"
	"time"
)

// WriteText writes the wf_* metrics in the Prometheus text exposition
// format 0.0.4 (what -metrics-file holds and node_exporter's textfile
// collector reads). The lock is held only while the text is built in
// memory, never while w is written.
func (m *Metrics) WriteText(w io.Writer) error {
	buf := textBufs.Get().(*[]byte)
	defer textBufs.Put(buf)
	*buf = m.AppendText((*buf)[:0])
	_, err := w.Write(*buf)
	return err
}

// AppendText appends the wf_* metrics in the text format to b.
func (m *Metrics) AppendText(b []byte) []byte {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.appendText(b, now)
}

// textBufs recycles scrape buffers: a large run's text is megabytes, and
// concurrent scrapes each need their own.
var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// leLabels are the `le="…"` label pairs of a bucket layout, +Inf last.
func leLabels(upper []float64) []string {
	out := make([]string, 0, len(upper)+1)
	for _, u := range upper {
		out = append(out, `le="`+string(appendFloat(nil, u))+`"`)
	}
	return append(out, `le="+Inf"`)
}

var (
	durationLE = leLabels(durationBuckets)
	delayLE    = leLabels(delayBuckets)
	latenessLE = leLabels(latenessBuckets)
)

func (s *state) appendText(b []byte, now time.Time) []byte {
	acts := s.sorted()

	if hasAny(acts, func(a *actStats) bool { return len(a.ends) > 0 }) {
		b = appendHeader(b, famActivities)
		for _, a := range acts {
			for i := range a.ends {
				b = appendCounter(b, famActivities.name, a.labels, a.ends[i].esc, a.ends[i].n)
			}
		}
	}
	if hasAny(acts, func(a *actStats) bool { return a.duration.n > 0 }) {
		b = appendHeader(b, famDuration)
		for _, a := range acts {
			if a.duration.n > 0 {
				b = appendHist(b, famDuration.name, a.labels, durationLE, &a.duration)
			}
		}
	}
	if len(acts) > 0 {
		b = appendHeader(b, famAttempts)
		for _, a := range acts {
			for o, n := range a.attempts {
				b = appendCounter(b, famAttempts.name, a.labels, outcomeLabels[o], n)
			}
		}
	}
	if hasAnyBudget(s.bOrder) {
		b = appendHeader(b, famExhausted)
		for _, bs := range s.bOrder {
			for i, seen := range bs.seenExhausted {
				if seen {
					b = appendCounter(b, famExhausted.name, bs.esc, exhaustedLabels[i], bs.exhausted[i])
				}
			}
		}
	}
	if len(s.bOrder) > 0 {
		used := make([]int, len(s.bOrder))
		for i, bs := range s.bOrder {
			used[i] = bs.usedAt(now)
		}
		b = appendHeader(b, famInWindow)
		for i, bs := range s.bOrder {
			b = appendGauge(b, famInWindow.name, bs.esc, float64(used[i]))
		}
		b = appendHeader(b, famUsage)
		for i, bs := range s.bOrder {
			b = appendGauge(b, famUsage.name, bs.esc, bs.ratio(used[i]))
		}
	}
	if len(s.cOrder) > 0 {
		b = appendHeader(b, famCircuit)
		for _, c := range s.cOrder {
			b = appendGauge(b, famCircuit.name, c.esc, c.state)
		}
	}
	b = appendHeader(b, famPending)
	b = appendGauge(b, famPending.name, "", float64(s.pending))
	if hasAny(acts, func(a *actStats) bool { return len(a.retries) > 0 }) {
		b = appendHeader(b, famRetries)
		for _, a := range acts {
			for i := range a.retries {
				b = appendCounter(b, famRetries.name, a.labels, a.retries[i].esc, a.retries[i].n)
			}
		}
	}
	if hasAny(acts, func(a *actStats) bool { return a.delay.n > 0 }) {
		b = appendHeader(b, famDelay)
		for _, a := range acts {
			if a.delay.n > 0 {
				b = appendHist(b, famDelay.name, a.labels, delayLE, &a.delay)
			}
		}
	}
	b = appendHeader(b, famRunning)
	b = appendGauge(b, famRunning.name, "", float64(s.running))
	b = appendHeader(b, famLateness)
	b = appendHist(b, famLateness.name, "", latenessLE, &s.lateness)
	return b
}

var (
	outcomeLabels   = [numOutcomes]string{`outcome="succeeded"`, `outcome="failed"`, `outcome="interrupted"`}
	exhaustedLabels = [2]string{`on_exhausted="wait"`, `on_exhausted="fail"`}
)

func hasAny(acts []*actStats, f func(*actStats) bool) bool {
	for _, a := range acts {
		if f(a) {
			return true
		}
	}
	return false
}

func hasAnyBudget(bs []*budgetStats) bool {
	for _, b := range bs {
		if b.seenExhausted[0] || b.seenExhausted[1] {
			return true
		}
	}
	return false
}

func appendHeader(b []byte, f family) []byte {
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.help...) // plain text: no backslash or newline to escape
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.typ...)
	return append(b, '\n')
}

// appendName writes name{l1,l2} (or just name without labels).
func appendName(b []byte, name, suffix, l1, l2 string) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if l1 == "" && l2 == "" {
		return b
	}
	b = append(b, '{')
	b = append(b, l1...)
	if l1 != "" && l2 != "" {
		b = append(b, ',')
	}
	b = append(b, l2...)
	return append(b, '}')
}

func appendCounter(b []byte, name, l1, l2 string, n uint64) []byte {
	b = appendName(b, name, "", l1, l2)
	b = append(b, ' ')
	b = strconv.AppendUint(b, n, 10)
	return append(b, '\n')
}

func appendGauge(b []byte, name, labels string, v float64) []byte {
	b = appendName(b, name, "", labels, "")
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

func appendHist(b []byte, name, labels string, le []string, h *hist) []byte {
	var cum uint64
	for i, l := range le {
		if h.counts != nil {
			cum += h.counts[i]
		}
		b = appendName(b, name, "_bucket", labels, l)
		b = append(b, ' ')
		b = strconv.AppendUint(b, cum, 10)
		b = append(b, '\n')
	}
	b = appendName(b, name, "_sum", labels, "")
	b = append(b, ' ')
	b = appendFloat(b, h.sum)
	b = append(b, '\n')
	b = appendName(b, name, "_count", labels, "")
	b = append(b, ' ')
	b = strconv.AppendUint(b, h.n, 10)
	return append(b, '\n')
}

// appendFloat formats v as client_golang's text encoder does.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
