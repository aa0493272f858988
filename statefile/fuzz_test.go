package statefile

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The log's and the checkpoint's decoders read whatever is on disk, so they
// are fuzzed: no input may panic, and whatever they accept must be exactly
// what the encoders write. The kept corpus is testdata/fuzz/<Fuzz...>/;
// go test -run TestFuzzSeeds -update-seeds rewrites the seeds.

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the fuzz seed corpus in testdata/fuzz")

func segmentSeeds(t testing.TB) map[string][]byte {
	whole, _ := buildSegment(t, 5, 8*sectorSize, 3, 700, 40)
	torn := bytes.Clone(whole)
	clear(torn[3*sectorSize : 4*sectorSize])
	flipped := bytes.Clone(whole)
	flipped[sectorSize+30] ^= 0x10
	empty, _ := buildSegment(t, 1, 2*sectorSize)
	// A power loss's residue: a spawn (unsynced) torn or its first sector
	// lost, records flagged recAfterUnsynced after it.
	run, offs := buildFlagged(t, 5, 12*sectorSize, rec{40, 0}, rec{1000, 0}, rec{700, recAfterUnsynced}, rec{30, recAfterUnsynced})
	residue := bytes.Clone(run)
	clear(residue[offs[1]+sectorSize : offs[1]+2*sectorSize])
	lost := bytes.Clone(run)
	clear(lost[offs[1] : offs[1]+sectorSize])
	return map[string][]byte{"seed-whole": whole, "seed-torn": torn, "seed-flipped": flipped, "seed-empty": empty, "seed-short": whole[:100],
		"seed-flagged": run, "seed-residue": residue, "seed-residue-lost": lost}
}

func checkpointSeeds() map[string][]byte {
	c := checkpoint{counter: 3, identity: testIdentity, flushed: 99, active: 90, manifestIno: 12, manifestLen: 345, manifestCRC: 0xdeadbeef, vlogFid: 2, vlogEnd: 4096, schema: stateSchemaWith}
	one := make([]byte, cpFileSize)
	copy(one[cpSlotSize:], encodeCheckpoint(c))
	two := bytes.Clone(one)
	c.counter, c.flushed = 4, 120
	copy(two, encodeCheckpoint(c))
	bad := bytes.Clone(two)
	bad[40] ^= 1
	return map[string][]byte{"seed-one-slot": one, "seed-two-slots": two, "seed-damaged-newer": bad, "seed-empty": make([]byte, cpFileSize)}
}

func opsSeeds() map[string][]byte {
	return map[string][]byte{
		"seed-set":     appendOps(nil, []op{{kind: opSet, key: []byte("a\x00x\x00\x01"), val: []byte(`{"name":"x"}`)}}),
		"seed-mixed":   appendOps(nil, []op{{kind: opSet, key: []byte("T1"), val: []byte{}}, {kind: opDelete, key: []byte("T1")}, {kind: opDeletePrefix, key: []byte("i")}}),
		"seed-cut":     appendOps(nil, []op{{kind: opSet, key: []byte("k"), val: []byte("vvvv")}})[:4],
		"seed-badkind": {7, 1, 'k'},
	}
}

func FuzzScanSegment(f *testing.F) {
	for _, s := range segmentSeeds(f) {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, last bool) {
		h, err := decodeSegHeader(data)
		if err != nil {
			return
		}
		sc, err := scanSegment(data, h, last)
		if err != nil {
			return
		}
		if sc.torn != nil && !last {
			t.Fatal("torn record outside the last segment")
		}
		for i, r := range sc.records {
			if r.seq != h.first+uint64(i) {
				t.Fatalf("record %d has sequence %d", i, r.seq)
			}
			rec := encodeRecord(r.seq, r.flags, r.payload)
			if !bytes.Equal(data[r.off:r.off+int64(len(rec))], rec) {
				t.Fatalf("record %d is not what the encoder writes", i)
			}
		}
		if sc.torn == nil && !allZero(data[sc.end:]) {
			t.Fatal("accepted non-zero bytes after the end of the log")
		}
		if tr := sc.torn; tr != nil {
			if tr.off != sc.end || tr.seq != h.first+uint64(len(sc.records)) || tr.end < tr.off || !allZero(data[tr.end:]) {
				t.Fatalf("torn %+v after %d records ending at %d", tr, len(sc.records), sc.end)
			}
			for _, hd := range tr.heads {
				if hd < tr.off || hd >= tr.end || hd%sectorSize != 0 {
					t.Fatalf("torn %+v: header outside the residue", tr)
				}
			}
		}
	})
}

func FuzzCheckpoint(f *testing.F) {
	for _, s := range checkpointSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCheckpointFile(b)
		if err != nil {
			return
		}
		slot := b[int(c.counter%2)*cpSlotSize:][:cpSlotSize]
		if !bytes.Equal(encodeCheckpoint(c), slot) {
			t.Fatal("accepted a slot that is not what the encoder writes")
		}
	})
}

func FuzzDecodeOps(f *testing.F) {
	for _, s := range opsSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := decodeOps(b)
		if err != nil {
			return
		}
		again, err := decodeOps(appendOps(nil, ops))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(ops) {
			t.Fatalf("ops do not round-trip: %v", err)
		}
	})
}

// TestFuzzSeeds keeps the seed corpus in testdata/fuzz in step with the
// seeds above (go test -update-seeds rewrites it).
func TestFuzzSeeds(t *testing.T) {
	sets := map[string]map[string][]byte{
		"FuzzCheckpoint": checkpointSeeds(),
		"FuzzDecodeOps":  opsSeeds(),
	}
	segs := map[string][]byte{}
	for name, s := range segmentSeeds(t) {
		segs[name] = s
	}
	for fuzz, seeds := range sets {
		for name, b := range seeds {
			checkSeed(t, fuzz, name, fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b))
		}
	}
	for name, b := range segs {
		checkSeed(t, "FuzzScanSegment", name, fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(true)\n", b))
	}
}

func checkSeed(t *testing.T, fuzz, name, content string) {
	t.Helper()
	path := filepath.Join("testdata", "fuzz", fuzz, name)
	if *updateSeeds {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != content {
		t.Errorf("%s is missing or stale (go test ./statefile -run TestFuzzSeeds -update-seeds): %v", path, err)
	}
}
