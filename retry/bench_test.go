package retry

import (
	"math/rand/v2"
	"testing"
	"time"
)

func BenchmarkDecide(b *testing.B) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rules := []Rule{
		{On: []string{"http:429"}, Policy: Policy{Backoff: Fixed, InitialInterval: 5 * time.Second, MaximumAttempts: 20}},
		{Policy: Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: 8 * time.Second,
			Jitter: Jitter{Mode: JitterFull}, NonRetryable: []string{"CardDeclined", "http:4*"}, Expiration: time.Hour}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	in := Input{Rules: rules, Failure: Failure{Type: "http:503"}, Attempt: 3, RuleCounts: []int{1, 1}, FirstStart: t0, Now: t0.Add(time.Minute), Rand: r}
	b.ReportAllocs()
	for b.Loop() {
		_ = Decide(in)
	}
}

func BenchmarkPreview(b *testing.B) {
	p := Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: time.Hour, MaximumAttempts: 1000}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Preview(5)
	}
}
