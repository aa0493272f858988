package statefile

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// TestPowerLossBetweenSpawnAndCommit: a RecordSpawn is written without a
// sync and the commit after it syncs both. A power loss during that sync
// can keep the commit's sectors and lose the spawn's (all of its one
// sector, or one sector of a longer one). Nothing from the spawn on was
// acknowledged as synced, so the state must open, repaired, with both
// gone and everything before them there, and take new commits.
func TestPowerLossBetweenSpawnAndCommit(t *testing.T) {
	for _, shape := range []string{"spawn lost", "spawn torn"} {
		t.Run(shape, func(t *testing.T) {
			activity := "a"
			if shape == "spawn torn" {
				activity = strings.Repeat("a", 1500) // a spawn record of several sectors
			}
			img, spawnOff := powerLossImage(t, activity)
			seg := lastSegment(t, img)
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			switch shape {
			case "spawn lost":
				clear(data[spawnOff : spawnOff+sectorSize])
			case "spawn torn":
				clear(data[spawnOff+sectorSize : spawnOff+2*sectorSize])
			}
			if err := os.WriteFile(seg, data, 0o600); err != nil {
				t.Fatal(err)
			}

			rep, err := Check(img, Options{})
			if err != nil || rep.TornRecord == 0 || rep.TornAfter != 1 {
				t.Fatalf("check of the power loss's residue: %+v, %v", rep, err)
			}
			s, err := Open(img, Options{})
			if err != nil {
				t.Fatalf("a power loss between a spawn and a commit left a state that does not open: %v", err)
			}
			if in, err := s.Instance("w", "before"); err != nil || in == nil {
				t.Fatalf("the synced commit before the spawn is gone: %v %v", in, err)
			}
			if in, err := s.Instance("w", "after"); err != nil || in != nil {
				t.Fatalf("the commit whose sync never completed was kept: %v %v", in, err)
			}
			if sps, err := s.Spawns("w", "before"); err != nil || len(sps) != 0 {
				t.Fatalf("spawns %v, %v: the torn spawn was applied", sps, err)
			}
			commitT(t, s, record.Mutation{Instance: inst("w", "later")})
			closeT(t, s)
			s = openT(t, img)
			for _, k := range []string{"before", "later"} {
				if in, err := s.Instance("w", k); err != nil || in == nil {
					t.Fatalf("%s after the repair and a commit: %v %v", k, in, err)
				}
			}
			closeT(t, s)
			if rep, err := Check(img, Options{}); err != nil || rep.TornRecord != 0 {
				t.Fatalf("after the repair: %+v, %v", rep, err)
			}
		})
	}
}

// TestWriterFlagsRecordsAfterUnsynced: a record carries recAfterUnsynced
// exactly when the record before it was written without a sync (a spawn),
// and a segment never starts with one: a rotation syncs the old segment
// first.
func TestWriterFlagsRecordsAfterUnsynced(t *testing.T) {
	dir := filepath.Join(scratchDir(t), ".wf")
	s, err := Open(dir, Options{segmentSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, s)
	for i := range 300 {
		if err := s.RecordSpawn(&record.Spawn{Workflow: "w", Instance: "k", Activity: fmt.Sprintf("a%d", i), Generation: 1, Number: 1, PID: 100 + i, BootID: "b"}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			// Two spawns in a row: the second is flagged too.
			if err := s.RecordSpawn(&record.Spawn{Workflow: "w", Instance: "k", Activity: fmt.Sprintf("b%d", i), Generation: 1, Number: 1, PID: 100 + i, BootID: "b"}); err != nil {
				t.Fatal(err)
			}
		}
		commitT(t, s, record.Mutation{Instance: inst("w", fmt.Sprintf("k%d", i))})
	}
	segs, _ := filepath.Glob(filepath.Join(dir, walName, "*.wal"))
	sort.Strings(segs)
	if len(segs) < 3 {
		t.Fatalf("%d segments: no rotations to check", len(segs))
	}
	flagged := 0
	for _, p := range segs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := scanT(data, true)
		if err != nil || sc.torn != nil {
			t.Fatalf("%s: %v, torn %+v", p, err, sc.torn)
		}
		for i, r := range sc.records {
			afterSpawn := false
			if i > 0 {
				ops, err := decodeOps(sc.records[i-1].payload)
				if err != nil {
					t.Fatal(err)
				}
				afterSpawn = len(ops) > 0 && ops[0].key[0] == tableSpawn
			}
			if got := r.flags&recAfterUnsynced != 0; got != afterSpawn {
				t.Fatalf("%s record %d: flagged %v, after a spawn's unsynced record %v", filepath.Base(p), r.seq, got, afterSpawn)
			}
			if r.flags != 0 {
				flagged++
			}
		}
	}
	if flagged < 300 {
		t.Fatalf("%d records flagged, want at least 300", flagged)
	}
}

// powerLossImage commits an instance, records a spawn and commits another
// instance, and returns a copy of the state taken while the store is open
// (what a crash right then leaves) and where the spawn's record starts in
// the last segment.
func powerLossImage(t *testing.T, activity string) (string, int64) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), ".wf")
	s := openT(t, dir)
	defer closeT(t, s)
	commitT(t, s, record.Mutation{Instance: inst("w", "before")})
	if err := s.RecordSpawn(&record.Spawn{Workflow: "w", Instance: "before", Activity: activity, Generation: 1, Number: 1, PID: 4242, BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	commitT(t, s, record.Mutation{Instance: inst("w", "after")})
	for range 20 {
		img := filepath.Join(scratchDir(t), ".wf")
		if err := tryCopyTree(dir, img); err != nil {
			continue
		}
		si, err := inspect(img)
		if err != nil {
			continue
		}
		recs := si.records
		if len(recs) < 2 {
			t.Fatalf("%d records replayed in the copy, want the spawn and the commit", len(recs))
		}
		return img, recs[len(recs)-2].off
	}
	t.Fatal("no consistent copy of the open store in 20 tries")
	return "", 0
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, walName, "*.wal"))
	if len(segs) == 0 {
		t.Fatal("no log segment")
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}
