package statefile

import (
	"github.com/wf-engine/wf/statefile/record"
)

// Breakers returns the state of every circuit breaker by name; empty, not
// nil, when there is none.
func (s *Store) Breakers() (map[string]*record.Breaker, error) {
	out := map[string]*record.Breaker{}
	err := s.read("read circuit breakers", func(snap *snapshot) error {
		return scan(snap, []byte{tableBreaker}, record.DecodeBreaker, func(k []byte, r *record.Breaker) error {
			if string(breakerKey(r.Name)) != string(k) {
				return mismatch("breaker", r.Name, string(k))
			}
			out[r.Name] = r
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
