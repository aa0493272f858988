package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBaseDelay(t *testing.T) {
	exp := Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: 8 * time.Second}
	tests := []struct {
		name string
		p    Policy
		n    int
		want time.Duration
	}{
		{"exponential first", exp, 1, time.Second},
		{"exponential second", exp, 2, 2 * time.Second},
		{"exponential fourth", exp, 4, 8 * time.Second},
		{"exponential capped", exp, 5, 8 * time.Second},
		{"exponential n below 1 is 1", exp, 0, time.Second},
		{"exponential negative n", exp, -7, time.Second},
		{"exponential coefficient 1.5", Policy{Backoff: Exponential, InitialInterval: 100 * time.Millisecond, Coefficient: 1.5, MaximumInterval: time.Minute}, 3, 225 * time.Millisecond},
		{"exponential coefficient 1 is constant", Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 1, MaximumInterval: time.Minute}, 50, time.Second},
		{"exponential zero coefficient defaults to 2", Policy{Backoff: Exponential, InitialInterval: time.Second, MaximumInterval: time.Minute}, 3, 4 * time.Second},
		{"empty backoff is exponential", Policy{InitialInterval: time.Second, Coefficient: 3, MaximumInterval: time.Minute}, 3, 9 * time.Second},
		{"default cap is 100x initial", Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2}, 20, 100 * time.Second},
		{"linear", Policy{Backoff: Linear, InitialInterval: time.Second, MaximumInterval: time.Minute}, 3, 3 * time.Second},
		{"linear capped", Policy{Backoff: Linear, InitialInterval: time.Second, MaximumInterval: 5 * time.Second}, 9, 5 * time.Second},
		{"linear default cap", Policy{Backoff: Linear, InitialInterval: time.Second}, 1000, 100 * time.Second},
		{"fixed", Policy{Backoff: Fixed, InitialInterval: 3 * time.Second, MaximumInterval: time.Minute}, 9, 3 * time.Second},
		{"fixed above cap", Policy{Backoff: Fixed, InitialInterval: 3 * time.Second, MaximumInterval: time.Second}, 1, time.Second},
		{"zero initial", Policy{Backoff: Exponential, Coefficient: 2}, 10, 0},
		// Overflow: the uncapped values do not fit in an int64.
		{"exponential huge n", exp, math.MaxInt, 8 * time.Second},
		{"exponential huge n default cap", Policy{Backoff: Exponential, InitialInterval: time.Hour, Coefficient: 10}, 1 << 40, 100 * time.Hour},
		{"exponential uncapped overflow saturates", Policy{Backoff: Exponential, InitialInterval: time.Hour, Coefficient: 10, MaximumInterval: maxDuration}, 1000, maxDuration},
		{"linear huge n", Policy{Backoff: Linear, InitialInterval: time.Hour, MaximumInterval: maxDuration}, math.MaxInt, maxDuration},
		{"default cap overflow", Policy{Backoff: Fixed, InitialInterval: maxDuration / 2}, 1, maxDuration / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.BaseDelay(tt.n)
			if got != tt.want {
				t.Errorf("BaseDelay(%d) = %v, want %v", tt.n, got, tt.want)
			}
			if got < 0 {
				t.Errorf("BaseDelay(%d) is negative: %v", tt.n, got)
			}
		})
	}
}

func TestBaseDelayNeverNegative(t *testing.T) {
	policies := []Policy{
		{Backoff: Exponential, InitialInterval: time.Nanosecond, Coefficient: 1e300, MaximumInterval: maxDuration},
		{Backoff: Exponential, InitialInterval: maxDuration, Coefficient: 2, MaximumInterval: maxDuration},
		{Backoff: Linear, InitialInterval: maxDuration, MaximumInterval: maxDuration},
		{Backoff: Exponential, InitialInterval: time.Second, Coefficient: math.Inf(1)},
		{Backoff: Exponential, InitialInterval: time.Second, Coefficient: math.NaN()},
		{Backoff: Exponential, InitialInterval: -time.Second, Coefficient: 2},
	}
	for i, p := range policies {
		for _, n := range []int{1, 2, 63, 64, 65, 1 << 20, math.MaxInt} {
			if d := p.BaseDelay(n); d < 0 {
				t.Errorf("policy %d: BaseDelay(%d) = %v < 0", i, n, d)
			}
		}
	}
}

// fixedRand returns the same draw every time, to pin jitter bounds.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func TestDelayDeterministic(t *testing.T) {
	base := Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: 10 * time.Second}
	with := func(j Jitter) Policy { p := base; p.Jitter = j; return p }
	tests := []struct {
		name string
		p    Policy
		n    int
		prev time.Duration
		r    Rand
		want time.Duration
	}{
		{"none", with(Jitter{Mode: JitterNone}), 3, 0, nil, 4 * time.Second},
		{"zero value is none", base, 3, 0, nil, 4 * time.Second},
		{"full low", with(Jitter{Mode: JitterFull}), 3, 0, fixedRand(0), 0},
		{"full mid", with(Jitter{Mode: JitterFull}), 3, 0, fixedRand(0.5), 2 * time.Second},
		{"equal low", with(Jitter{Mode: JitterEqual}), 3, 0, fixedRand(0), 2 * time.Second},
		{"equal mid", with(Jitter{Mode: JitterEqual}), 3, 0, fixedRand(0.5), 3 * time.Second},
		{"decorrelated first retry uses initial as prev", with(Jitter{Mode: JitterDecorrelated}), 1, 0, fixedRand(0.5), 2 * time.Second},
		{"decorrelated low", with(Jitter{Mode: JitterDecorrelated}), 5, 3 * time.Second, fixedRand(0), time.Second},
		{"decorrelated from prev", with(Jitter{Mode: JitterDecorrelated}), 5, 3 * time.Second, fixedRand(0.5), 5 * time.Second},
		{"decorrelated capped", with(Jitter{Mode: JitterDecorrelated}), 5, 9 * time.Second, fixedRand(0.99), 10 * time.Second},
		{"decorrelated huge prev", with(Jitter{Mode: JitterDecorrelated}), 5, maxDuration, fixedRand(0.99), 10 * time.Second},
		{"fraction low", with(Jitter{Mode: JitterFraction, Fraction: 0.2}), 3, 0, fixedRand(0), 3200 * time.Millisecond},
		{"fraction mid", with(Jitter{Mode: JitterFraction, Fraction: 0.2}), 3, 0, fixedRand(0.5), 4 * time.Second},
		{"fraction may exceed cap", with(Jitter{Mode: JitterFraction, Fraction: 0.5}), 9, 0, fixedRand(0.9), 14 * time.Second},
		{"fraction above 1 is 1", with(Jitter{Mode: JitterFraction, Fraction: 3}), 3, 0, fixedRand(0), 0},
		{"nil rand falls back to the base delay", with(Jitter{Mode: JitterFull}), 3, 0, nil, 4 * time.Second},
		{"fraction zero is none", with(Jitter{Mode: JitterFraction}), 3, 0, nil, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.n, tt.prev, tt.r); got != tt.want {
				t.Errorf("Delay(%d, %v) = %v, want %v", tt.n, tt.prev, got, tt.want)
			}
		})
	}
}

// TestJitterDistribution draws many delays per mode from a seeded source
// and checks the bounds of every draw and the mean against theory.
func TestJitterDistribution(t *testing.T) {
	const draws = 200_000
	base := Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: 20 * time.Second}
	d := float64(8 * time.Second) // BaseDelay(4)
	tests := []struct {
		name   string
		jitter Jitter
		prev   time.Duration
		lo, hi float64
		mean   float64
	}{
		{"full", Jitter{Mode: JitterFull}, 0, 0, d, d / 2},
		{"equal", Jitter{Mode: JitterEqual}, 0, d / 2, d, 3 * d / 4},
		// U[1s, 3*4s=12s] below the 20s cap: mean 6.5s.
		{"decorrelated uncapped", Jitter{Mode: JitterDecorrelated}, 4 * time.Second, 1e9, 12e9, 6.5e9},
		// U[1s, 30s] capped at 20s: E = (∫1..20 x dx + 20*(30-20)) / 29.
		{"decorrelated capped", Jitter{Mode: JitterDecorrelated}, 10 * time.Second, 1e9, 20e9, ((20*20-1)/2.0 + 200) / 29 * 1e9},
		{"fraction 0.25", Jitter{Mode: JitterFraction, Fraction: 0.25}, 0, 0.75 * d, 1.25 * d, d},
		{"fraction 1", Jitter{Mode: JitterFraction, Fraction: 1}, 0, 0, 2 * d, d},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(42, uint64(i)))
			p := base
			p.Jitter = tt.jitter
			var sum float64
			for range draws {
				got := float64(p.Delay(4, tt.prev, r))
				if got < tt.lo || got > tt.hi {
					t.Fatalf("draw %v outside [%v, %v]", time.Duration(got), time.Duration(tt.lo), time.Duration(tt.hi))
				}
				sum += got
			}
			mean := sum / draws
			if math.Abs(mean-tt.mean) > 0.01*tt.mean {
				t.Errorf("mean %v, want %v within 1%%", time.Duration(mean), time.Duration(tt.mean))
			}
		})
	}
}
