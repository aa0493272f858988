package statefile

import (
	"fmt"

	"github.com/wf-engine/wf/statefile/record"
)

// RecordSpawns is RecordSpawn for several records at once, in one log
// record: the executor writes the spawn records queued while no commit
// carried them in one go, instead of one write (and one wait for the
// commit in flight) per attempt. Records apply in order, so of two
// records of one activity the later one stays.
func (s *Store) RecordSpawns(sps []*record.Spawn) error {
	if s.w == nil {
		return fmt.Errorf("record spawns: %w", ErrReadOnly)
	}
	if len(sps) == 0 {
		return nil
	}
	muts := make([]record.Mutation, len(sps))
	for i, sp := range sps {
		muts[i] = record.Mutation{Spawn: sp}
	}
	ops, err := encodeMutations(muts)
	if err != nil {
		return fmt.Errorf("record spawns: %w", err)
	}
	return s.commitOps(ops, false)
}
