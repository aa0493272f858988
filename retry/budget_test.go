package retry

import (
	"slices"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)
	at := func(secs ...int) []time.Time {
		out := make([]time.Time, len(secs))
		for i, s := range secs {
			out[i] = t0.Add(time.Duration(s) * time.Second)
		}
		return out
	}
	b := Budget{Name: "api", MaxRetries: 3, Window: time.Minute, OnExhausted: "wait"}
	tests := []struct {
		name     string
		b        Budget
		stamps   []time.Time
		now      time.Time
		used     int
		ok       bool
		nextFree time.Time
		pruned   []time.Time
	}{
		{"empty", b, nil, t0, 0, true, t0, []time.Time{}},
		{"below max", b, at(0, 10), t0.Add(20 * time.Second), 2, true, t0.Add(20 * time.Second), at(0, 10)},
		{"full", b, at(0, 10, 20), t0.Add(30 * time.Second), 3, false, t0.Add(time.Minute), at(0, 10, 20)},
		{"full, unsorted", b, at(20, 0, 10), t0.Add(30 * time.Second), 3, false, t0.Add(time.Minute), at(20, 0, 10)},
		{"stamp exactly one window old has left", b, at(0, 10, 20), t0.Add(time.Minute), 2, true, t0.Add(time.Minute), at(10, 20)},
		{"stamp just inside the window", b, at(0, 10, 20), t0.Add(time.Minute - 1), 3, false, t0.Add(time.Minute), at(0, 10, 20)},
		{"old stamps pruned", b, at(-300, -120, 0, 10), t0.Add(30 * time.Second), 2, true, t0.Add(30 * time.Second), at(0, 10)},
		{"future stamps do not count", b, at(0, 100), t0.Add(30 * time.Second), 1, true, t0.Add(30 * time.Second), at(0)},
		{"over budget after shrinking waits for enough to leave", b, at(0, 5, 10, 15, 20), t0.Add(30 * time.Second), 5, false, t0.Add(70 * time.Second), at(0, 5, 10, 15, 20)},
		{"zero max never allows", Budget{MaxRetries: 0, Window: time.Minute}, nil, t0, 0, false, time.Time{}, []time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.stamps)
			if got := tt.b.Used(tt.stamps, tt.now); got != tt.used {
				t.Errorf("Used = %d, want %d", got, tt.used)
			}
			ok, next := tt.b.Allow(tt.stamps, tt.now)
			if ok != tt.ok || !next.Equal(tt.nextFree) {
				t.Errorf("Allow = %v, %v; want %v, %v", ok, next, tt.ok, tt.nextFree)
			}
			pruned := tt.b.Prune(tt.stamps, tt.now)
			if !slices.EqualFunc(pruned, tt.pruned, time.Time.Equal) {
				t.Errorf("Prune = %v, want %v", pruned, tt.pruned)
			}
			if !slices.EqualFunc(tt.stamps, before, time.Time.Equal) {
				t.Errorf("input stamps modified")
			}
			if len(pruned) > 0 && len(tt.stamps) > 0 && &pruned[0] == &tt.stamps[0] {
				t.Errorf("Prune returned the input slice, want a new one")
			}
		})
	}
}
