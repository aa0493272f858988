package statefile

import (
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// TestNoTimerBeforeWritesNoIndexOp: an activity without a timer written
// with NoTimerBefore makes one op (its record) instead of two (record and
// timer index delete); without the hint the index entry is deleted blind,
// and a record with a timer sets it whatever the hint. PendingTimers
// checks the index against the records after each commit.
func TestNoTimerBeforeWritesNoIndexOp(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	waiting, done := act("w", "k", "a", true), act("w", "k", "a", false)
	tests := []struct {
		name   string
		m      record.Mutation
		ops    int
		timers int
	}{
		{"timer set", record.Mutation{Activity: waiting}, 2, 1},
		{"timer set, hint ignored", record.Mutation{Activity: waiting, NoTimerBefore: true}, 2, 1},
		{"no timer: deleted blind", record.Mutation{Activity: done}, 2, 0},
		{"no timer, none before", record.Mutation{Activity: done, NoTimerBefore: true}, 1, 0},
	}
	for _, tt := range tests {
		ops, err := encodeMutations([]record.Mutation{tt.m})
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) != tt.ops {
			t.Errorf("%s: %d ops, want %d", tt.name, len(ops), tt.ops)
		}
		commitT(t, s, tt.m)
		timers, err := s.PendingTimers()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(timers) != tt.timers {
			t.Errorf("%s: %d pending timers, want %d", tt.name, len(timers), tt.timers)
		}
	}
}
