package statefile

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

// BenchmarkActivitiesOfSome: the activities of every n-th instance of a
// state of 100,000 activities (1,000 instances of 100, 10,000 of 10, or
// 20 of 5,000 as in executor's BenchmarkRecover100kDueTimers),
// read by ActivitiesOf in one read and by Activities one instance at a
// time, on the same open Store, alternated: where ActivitiesOf wins, and
// whether it should step over the records of instances not asked for or
// seek past them (readmany.go).
//
//	go test ./statefile -run '^$' -bench ActivitiesOfSome -benchtime 3x
func BenchmarkActivitiesOfSome(b *testing.B) {
	for _, per := range []int{100, 10, 5_000} {
		instances := 100_000 / per
		dir := manyInstancesState(b, instances, per)
		s := openT(b, dir)
		last := 0
		for _, every := range []int{1, 2, 4, 10, 100, instances} {
			var keys []string
			for i := 0; i < instances; i += every {
				keys = append(keys, fmt.Sprintf("instance-%d", i))
			}
			if len(keys) == last {
				continue
			}
			last = len(keys)
			b.Run(fmt.Sprintf("per=%d/of=%d", per, len(keys)), func(b *testing.B) {
				var one, many time.Duration
				for range b.N {
					start := time.Now()
					got, err := s.ActivitiesOf("bench", keys)
					if err != nil || len(got) != len(keys) {
						b.Fatalf("%d instances, %v", len(got), err)
					}
					many += time.Since(start)
					start = time.Now()
					for _, k := range keys {
						if _, err := s.Activities("bench", k); err != nil {
							b.Fatal(err)
						}
					}
					one += time.Since(start)
				}
				b.ReportMetric(float64(many.Microseconds())/float64(b.N)/1e3, "many_ms")
				b.ReportMetric(float64(one.Microseconds())/float64(b.N)/1e3, "one_by_one_ms")
				b.ReportMetric(float64(many)/float64(one), "ratio")
			})
		}
		closeT(b, s)
	}
}

// manyInstancesState is reopenState's state with the 100,000 activities
// in instances of per.
func manyInstancesState(b *testing.B, instances, per int) string {
	dir := filepath.Join(b.TempDir(), ".wf")
	s := openT(b, dir)
	var muts []record.Mutation
	for i := range instances * per {
		a := act("bench", fmt.Sprintf("instance-%d", i/per), fmt.Sprintf("activity-%d", i%per), true)
		muts = append(muts, record.Mutation{Activity: a})
		if len(muts) == 2_000 {
			commitT(b, s, muts...)
			muts = muts[:0]
		}
	}
	closeT(b, s)
	return dir
}
