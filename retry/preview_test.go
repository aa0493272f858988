package retry

import (
	"slices"
	"testing"
	"time"
)

func TestPreview(t *testing.T) {
	s := time.Second
	payment := Policy{Backoff: Exponential, InitialInterval: s, Coefficient: 2, MaximumInterval: 8 * s, MaximumAttempts: 5}
	tests := []struct {
		name     string
		p        Policy
		maxShown int
		want     Preview
	}{
		{"payment", payment, 10, Preview{Attempts: 5, Waits: []time.Duration{s, 2 * s, 4 * s, 8 * s}, TotalWait: 15 * s}},
		{"truncated", payment, 2, Preview{Attempts: 5, Waits: []time.Duration{s, 2 * s}, More: true, TotalWait: 15 * s}},
		{"none shown", payment, 0, Preview{Attempts: 5, More: true, TotalWait: 15 * s}},
		{"one attempt", Policy{InitialInterval: s, MaximumAttempts: 1}, 5, Preview{Attempts: 1}},
		{"capped tail counted", Policy{Backoff: Exponential, InitialInterval: s, Coefficient: 2, MaximumInterval: 4 * s, MaximumAttempts: 10}, 4,
			Preview{Attempts: 10, Waits: []time.Duration{s, 2 * s, 4 * s, 4 * s}, More: true, TotalWait: (1 + 2 + 4*7) * s}},
		{"linear", Policy{Backoff: Linear, InitialInterval: s, MaximumInterval: time.Minute, MaximumAttempts: 4}, 5,
			Preview{Attempts: 4, Waits: []time.Duration{s, 2 * s, 3 * s}, TotalWait: 6 * s}},
		{"fixed with jitter", Policy{Backoff: Fixed, InitialInterval: 2 * s, MaximumAttempts: 3, Jitter: Jitter{Mode: JitterFull}}, 5,
			Preview{Attempts: 3, Waits: []time.Duration{2 * s, 2 * s}, TotalWait: 4 * s, Jitter: Jitter{Mode: JitterFull}}},
		{"forever", Policy{Backoff: Exponential, InitialInterval: s, Coefficient: 2, MaximumInterval: 8 * s}, 5,
			Preview{Waits: []time.Duration{s, 2 * s, 4 * s, 8 * s, 8 * s}, More: true, Forever: true}},
		{"unlimited attempts with expiration", Policy{Backoff: Exponential, InitialInterval: s, Coefficient: 2, MaximumInterval: 8 * s, Expiration: 30 * s}, 10,
			// 1+2+4+8+8 = 23; one more 8s wait would reach 31 >= 30.
			Preview{Waits: []time.Duration{s, 2 * s, 4 * s, 8 * s, 8 * s}, TotalWait: 23 * s, Expiration: 30 * s}},
		{"expiration cuts limited attempts", Policy{Backoff: Exponential, InitialInterval: s, Coefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 10, Expiration: 7 * s}, 10,
			// 1+2 = 3; adding 4 reaches 7, which is not before the expiration.
			Preview{Attempts: 10, Waits: []time.Duration{s, 2 * s}, TotalWait: 3 * s, Expiration: 7 * s}},
		{"expiration in the steady tail", Policy{Backoff: Fixed, InitialInterval: 10 * s, Expiration: time.Minute}, 3,
			// 5 waits of 10s fit below 60s.
			Preview{Waits: []time.Duration{10 * s, 10 * s, 10 * s}, More: true, TotalWait: 50 * s, Expiration: time.Minute}},
		{"huge attempt count saturates", Policy{Backoff: Fixed, InitialInterval: time.Hour, MaximumAttempts: 1 << 62}, 1,
			Preview{Attempts: 1 << 62, Waits: []time.Duration{time.Hour}, More: true, TotalWait: maxDuration}},
		{"zero waits with expiration never end", Policy{Backoff: Fixed, Expiration: time.Minute}, 2,
			Preview{Waits: []time.Duration{0, 0}, More: true, Expiration: time.Minute}},
		{"slow growth with many attempts", Policy{Backoff: Exponential, InitialInterval: time.Millisecond, Coefficient: 1.001, MaximumInterval: 2 * time.Millisecond, MaximumAttempts: 1_000_000}, 1,
			Preview{Attempts: 1_000_000, Waits: []time.Duration{time.Millisecond}, More: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.Preview(tt.maxShown)
			if tt.name == "slow growth with many attempts" {
				// ~694 growing waits then the 2ms cap: the total is close
				// to (1e6-1) * 2ms and never above it.
				upper := 999_999 * 2 * time.Millisecond
				if got.TotalWait > upper || got.TotalWait < upper-700*time.Millisecond {
					t.Errorf("TotalWait = %v, want just below %v", got.TotalWait, upper)
				}
				got.TotalWait = 0
			}
			if got.Attempts != tt.want.Attempts || !slices.Equal(got.Waits, tt.want.Waits) || got.More != tt.want.More ||
				got.TotalWait != tt.want.TotalWait || got.Jitter != tt.want.Jitter || got.Expiration != tt.want.Expiration ||
				got.Forever != tt.want.Forever {
				t.Errorf("Preview =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

// TestPreviewRetryAfterCap: the preview says how long a delay the activity
// asks for may replace a computed wait.
func TestPreviewRetryAfterCap(t *testing.T) {
	p := Policy{Backoff: Fixed, InitialInterval: time.Second, MaximumAttempts: 3}
	if got := p.Preview(5).RetryAfterCap; got != 0 {
		t.Errorf("not honoured: RetryAfterCap = %v, want 0", got)
	}
	p.HonorRetryAfter = true
	if got := p.Preview(5).RetryAfterCap; got != DefaultMaximumRetryAfter {
		t.Errorf("default: RetryAfterCap = %v, want %v", got, DefaultMaximumRetryAfter)
	}
	p.MaximumRetryAfter = 90 * time.Second
	pv := p.Preview(5)
	if pv.RetryAfterCap != 90*time.Second || pv.TotalWait != 2*time.Second {
		t.Errorf("RetryAfterCap = %v TotalWait = %v, want 1m30s and 2s", pv.RetryAfterCap, pv.TotalWait)
	}
}
