package metrics

import (
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// WriteText writes the wf_* metrics in the Prometheus text exposition
// format 0.0.4 (what -metrics-file holds and node_exporter's textfile
// collector reads). It streams: the lock is taken for a few hundred
// activities at a time and never while w is written, so a slow reader
// delays no event, and a large scrape's encoding overlaps its transfer.
// As with client_golang, each value is read once and consistently, the
// scrape as a whole is not one instant.
func (m *Metrics) WriteText(w io.Writer) error {
	buf := textBufs.Get().(*[]byte)
	defer textBufs.Put(buf)
	tw := &textWriter{m: m, w: w, b: (*buf)[:0]}
	tw.write(m.now())
	tw.flush(0)
	*buf = tw.b
	return tw.err
}

// AppendText appends the wf_* metrics in the text format to b.
func (m *Metrics) AppendText(b []byte) []byte {
	aw := &appendWriter{b: b}
	_ = m.WriteText(aw) // appendWriter never fails
	return aw.b
}

// textBufs recycles scrape buffers; concurrent scrapes each take their own.
var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, flushAt+64<<10); return &b }}

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

const (
	// chunk is how many activities are encoded per hold of the lock.
	chunk = 256
	// flushAt is how much text is buffered before it is written out.
	flushAt = 256 << 10
)

type textWriter struct {
	m   *Metrics
	w   io.Writer
	b   []byte
	err error
}

// flush writes the buffer once it holds at least min bytes.
func (tw *textWriter) flush(min int) {
	if len(tw.b) < min || len(tw.b) == 0 || tw.err != nil {
		return
	}
	_, tw.err = tw.w.Write(tw.b)
	tw.b = tw.b[:0]
}

// family writes one per-activity family: its header before its first
// sample, then each activity's samples, a chunk of activities per lock.
func (tw *textWriter) family(acts []*actStats, f family, has func(*actStats) bool, samples func([]byte, *actStats) []byte) {
	header := false
	for lo := 0; lo < len(acts) && tw.err == nil; lo += chunk {
		tw.m.mu.Lock()
		for _, a := range acts[lo:min(lo+chunk, len(acts))] {
			if !has(a) {
				continue
			}
			if !header {
				tw.b = appendHeader(tw.b, f)
				header = true
			}
			tw.b = samples(tw.b, a)
		}
		tw.m.mu.Unlock()
		tw.flush(flushAt)
	}
}

func (tw *textWriter) write(now time.Time) {
	tw.m.mu.Lock()
	// The activities known now, in order; one created meanwhile waits for
	// the next scrape. The structs themselves are read under the lock.
	acts := slices.Clone(tw.m.st.sorted())
	tw.m.mu.Unlock()
	always := func(*actStats) bool { return true }

	tw.family(acts, famActivities, func(a *actStats) bool { return len(a.ends) > 0 }, func(b []byte, a *actStats) []byte {
		for i := range a.ends {
			b = appendCounter(b, famActivities.name, a.labels, a.ends[i].esc, a.ends[i].n)
		}
		return b
	})
	tw.family(acts, famDuration, func(a *actStats) bool { return a.duration.n > 0 }, func(b []byte, a *actStats) []byte {
		return appendHist(b, famDuration.name, a.labels, durationLE, &a.duration)
	})
	tw.family(acts, famAttempts, always, func(b []byte, a *actStats) []byte {
		for o, n := range a.attempts {
			b = appendCounter(b, famAttempts.name, a.labels, outcomeLabels[o], n)
		}
		return b
	})
	tw.m.mu.Lock()
	tw.b = tw.m.st.appendBudgets(tw.b, now)
	tw.m.mu.Unlock()
	tw.flush(flushAt)
	tw.family(acts, famRetries, func(a *actStats) bool { return len(a.retries) > 0 }, func(b []byte, a *actStats) []byte {
		for i := range a.retries {
			b = appendCounter(b, famRetries.name, a.labels, a.retries[i].esc, a.retries[i].n)
		}
		return b
	})
	tw.family(acts, famDelay, func(a *actStats) bool { return a.delay.n > 0 }, func(b []byte, a *actStats) []byte {
		return appendHist(b, famDelay.name, a.labels, delayLE, &a.delay)
	})
	tw.m.mu.Lock()
	s := &tw.m.st
	tw.b = appendHeader(tw.b, famRunning)
	tw.b = appendGauge(tw.b, famRunning.name, "", float64(s.running))
	tw.b = appendHeader(tw.b, famLateness)
	tw.b = appendHist(tw.b, famLateness.name, "", latenessLE, &s.lateness)
	tw.m.mu.Unlock()
}

// appendBudgets writes the budget, circuit and pending-timer families,
// which sort between wf_attempts_total and wf_retries_total.
func (s *state) appendBudgets(b []byte, now time.Time) []byte {
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
	if s.hasBeats {
		b = appendHeader(b, famBeats)
		for _, a := range s.sorted() {
			if a.heartbeats > 0 {
				b = appendCounter(b, famBeats.name, a.labels, "", a.heartbeats)
			}
		}
	}
	b = appendHeader(b, famPending)
	return appendGauge(b, famPending.name, "", float64(s.pending))
}

var (
	outcomeLabels   = [numOutcomes]string{`outcome="succeeded"`, `outcome="failed"`, `outcome="interrupted"`}
	exhaustedLabels = [2]string{`on_exhausted="wait"`, `on_exhausted="fail"`}
)

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
	// Every bucket line starts with the same `name_bucket{labels,`: write
	// it once and copy it, the hot loop of a large scrape.
	start := len(b)
	b = append(b, name...)
	b = append(b, "_bucket{"...)
	if labels != "" {
		b = append(b, labels...)
		b = append(b, ',')
	}
	end := len(b)
	var cum uint64
	for i, l := range le {
		if i > 0 {
			b = append(b, b[start:end]...)
		}
		if h.counts != nil {
			cum += h.counts[i]
		}
		b = append(b, l...)
		b = append(b, "} "...)
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
