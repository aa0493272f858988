package statefile

import (
	"fmt"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

func TestZZTiming(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	muts := make([]record.Mutation, 0, 2000)
	for i := range 100000 {
		muts = append(muts, record.Mutation{Activity: act("bench", fmt.Sprintf("instance-%d", i/100), fmt.Sprintf("activity-%d", i%100), true)})
		if len(muts) == 2000 {
			commitT(t, s, muts...)
			muts = muts[:0]
		}
	}
	closeT(t, s)
	for range 2 {
		a := time.Now()
		s = openT(t, dir)
		b := time.Now()
		ts, _ := s.PendingTimers()
		c := time.Now()
		closeT(t, s)
		d := time.Now()
		t.Logf("open %v timers %v (%d) close %v", b.Sub(a), c.Sub(b), len(ts), d.Sub(c))
	}
}
