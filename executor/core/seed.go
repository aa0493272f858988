package core

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"strconv"

	"github.com/wf-engine/wf/retry"
)

// JitterRand is the random source of one retry decision: the decision
// after attempt number of the given generation of one activity of one
// instance, in a run seeded with seed. Each decision gets its own source,
// derived from those values alone, so the delay drawn never depends on the
// order in which failures arrive. That makes the delays the same on every
// replay and on both engines: the local shell and the Temporal interpreter
// pass the same seed for the same state, and a Temporal replay re-derives
// the same draws.
func JitterRand(seed, workflow, key, activity string, generation, attempt int) retry.Rand {
	h := sha256.New()
	for _, s := range []string{"wf-jitter-1", seed, workflow, key, activity, strconv.Itoa(generation), strconv.Itoa(attempt)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	return rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))
}
