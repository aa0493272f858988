package core

import "testing"

func TestJitterRandDependsOnlyOnItsInputs(t *testing.T) {
	a := JitterRand("s", "wf", "k", "act", 1, 2).Float64()
	if b := JitterRand("s", "wf", "k", "act", 1, 2).Float64(); a != b {
		t.Fatalf("same inputs drew %v and %v", a, b)
	}
	others := []float64{
		JitterRand("t", "wf", "k", "act", 1, 2).Float64(),
		JitterRand("s", "wf2", "k", "act", 1, 2).Float64(),
		JitterRand("s", "wf", "k2", "act", 1, 2).Float64(),
		JitterRand("s", "wf", "k", "act2", 1, 2).Float64(),
		JitterRand("s", "wf", "k", "act", 2, 2).Float64(),
		JitterRand("s", "wf", "k", "act", 1, 3).Float64(),
	}
	for i, o := range others {
		if o == a {
			t.Errorf("variant %d drew the same value %v", i, a)
		}
	}
}
