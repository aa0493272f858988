package statefile

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/wf-engine/wf/statefile/record"
)

// ActivitiesOf returns the activities of the given instances of workflow,
// by instance key and then activity name, in one read: one snapshot and
// one iterator over the workflow's activities, going from one asked-for
// instance to the next (seeking past those not asked for, so that one
// instance of many costs a seek, not a scan), decoded on every CPU while
// the scan goes on. The executor's start reads every instance it runs
// this way; a read per instance (Activities) spent ~10 µs on its own
// transaction, iterator and seek before its first record and decoded its
// records on the caller alone.
//
// Every key asked for is in the result, its map empty (not nil) when the
// instance has no activities (or does not exist); a key asked for twice
// is read once. Each record is checked against the key it is stored
// under, as Activities does; an error names the record's key.
func (s *Store) ActivitiesOf(workflow string, keys []string) (map[string]map[string]*record.Activity, error) {
	sorted := slices.Clone(keys)
	// The escaped prefixes sort as the keys do (appendName), so the
	// instances come in the iterator's order.
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	what := fmt.Sprintf("read activities of %d instances of %s", len(sorted), workflow)
	chunks, err := s.readChunks(what, func(snap *snapshot, add func(c *cursor, key []byte) error) error {
		if len(sorted) == 0 {
			return nil
		}
		// The iterator's prefix is the longest all the instances share
		// (with one instance, its own, as Activities has it): Badger
		// leaves out the tables whose keys are all outside it, so it
		// seeks and merges fewer. Under the workflow's prefix, a read of
		// one instance of 100 records took 0.15–0.30 ms against
		// Activities' 0.07–0.16 in two runs (not in a third).
		first := instancePrefix(tableActivity, workflow, sorted[0])
		last := instancePrefix(tableActivity, workflow, sorted[len(sorted)-1])
		n := 0
		for n < len(first) && n < len(last) && first[n] == last[n] {
			n++
		}
		c := snap.cursor(first[:n])
		defer c.close()
		prefix := make([]byte, 0, len(last)+64)
		for i, key := range sorted {
			prefix = instancePrefixTo(prefix[:0], workflow, key)
			// The cursor is past the previous instance asked for: on
			// the first record of this one when the instances asked for
			// are neighbours (all of them, at start-up), and then it
			// needs no seek. Otherwise it seeks even past a few records:
			// on an iterator already open, a seek cost no more than
			// stepping over 10 records (BenchmarkActivitiesOfSome,
			// 2026-12-02: seeking at once beat stepping over up to 8 or
			// 32 records first, with instances of 10 records asked for
			// every second, fourth or tenth).
			if i == 0 || (c.valid() && bytes.Compare(c.key(), prefix) < 0) {
				c.seek(prefix)
			}
			for ; c.valid() && bytes.HasPrefix(c.key(), prefix); c.next() {
				if err := add(c, c.key()); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(k []byte, r *record.Activity, kb []byte) ([]byte, error) {
		// k is under the prefix of an instance asked for, so a record
		// whose own key is k is of that instance.
		kb = appendActivityKey(kb[:0], r.Workflow, r.Instance, r.Name)
		if r.Workflow != workflow || !bytes.Equal(kb, k) {
			return kb, mismatch("activity", r.Workflow+"/"+r.Instance+"/"+r.Name, describeKey(k))
		}
		return kb, nil
	}, groupByInstance)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]*record.Activity, len(sorted))
	// The runs at the chunks' ends, in order: an instance whose records
	// two or more chunks share has its runs one after another.
	var ends []instanceActs
	for _, rc := range chunks {
		for _, g := range rc.groups {
			if g.acts != nil {
				out[g.key] = g.acts
			} else {
				ends = append(ends, g)
			}
		}
		rc.groups = nil
	}
	for len(ends) > 0 {
		n, size := 1, len(ends[0].recs)
		for n < len(ends) && ends[n].key == ends[0].key {
			size += len(ends[n].recs)
			n++
		}
		m := make(map[string]*record.Activity, size)
		for _, g := range ends[:n] {
			for _, r := range g.recs {
				m[r.Name] = r
			}
		}
		out[ends[0].key] = m
		ends = ends[n:]
	}
	for _, key := range sorted {
		if out[key] == nil {
			out[key] = map[string]*record.Activity{}
		}
	}
	return out, nil
}

// instancePrefixTo appends instancePrefix(tableActivity, workflow, key)
// to b.
func instancePrefixTo(b []byte, workflow, key string) []byte {
	return appendName(appendName(append(b, tableActivity), workflow), key)
}

// instanceActs are the activities of one instance in a chunk: by name
// (acts), or, for the runs at the chunk's ends, which may go on in the
// chunk before or after, the records (recs) for the caller to put with
// the rest of theirs.
type instanceActs struct {
	key  string
	acts map[string]*record.Activity
	recs []*record.Activity
}

// groupByInstance puts the records of a decoded chunk into a map per
// instance: on the decoders, a chunk at a time right after decoding it,
// rather than on the caller once the read is over (~55 ns per record,
// 5.5 ms of a read of 100,000, and the records no longer in cache). The
// records were checked against their keys, so those of an instance are
// neighbours; the first and last run may be of an instance that other
// chunks have records of too, and are left to the caller, so that no
// map is built twice (an instance of 5,000 records spans ten chunks).
func groupByInstance(rc *rawChunk) {
	recs := rc.out
	for first := true; len(recs) > 0; first = false {
		n := 1
		for n < len(recs) && recs[n].Instance == recs[0].Instance {
			n++
		}
		g := instanceActs{key: recs[0].Instance}
		if first || n == len(recs) {
			g.recs = recs[:n:n]
		} else {
			g.acts = make(map[string]*record.Activity, n)
			for _, r := range recs[:n] {
				g.acts[r.Name] = r
			}
		}
		rc.groups = append(rc.groups, g)
		recs = recs[n:]
	}
}
