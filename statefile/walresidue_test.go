package statefile

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
)

// rec is one record of a test segment: its payload length and flags.
type rec struct {
	n     int
	flags uint32
}

// buildFlagged lays out a segment of the given size holding records of
// the given payload sizes and flags, numbered from first.
func buildFlagged(t testing.TB, first uint64, size int64, recs ...rec) ([]byte, []int64) {
	t.Helper()
	h := segHeader{identity: testIdentity, first: first, size: uint64(size)}
	data := make([]byte, size)
	copy(data, encodeSegHeader(h))
	off := int64(segHeaderSize)
	var offs []int64
	for i, r := range recs {
		b := encodeRecord(first+uint64(i), r.flags, bytes.Repeat([]byte{byte('a' + i%26)}, r.n))
		if off+int64(len(b)) > size {
			t.Fatalf("record %d does not fit", i)
		}
		copy(data[off:], b)
		offs = append(offs, off)
		off += alignUp(int64(len(b)))
	}
	return data, offs
}

const f = recAfterUnsynced

// TestPowerLossResidue: the last segment ends with a run of records
// written with no sync completed in between (the first unflagged, the
// rest flagged), and a power loss kept some of their sectors and not
// others. Each shape is read as the valid records before the first record
// cut short, and the residue from it to the end, which the writer clears.
func TestPowerLossResidue(t *testing.T) {
	// 1: synced; 2: a spawn (1000 bytes, 3 sectors), unsynced; 3 and 4
	// (700 bytes, 2 sectors each) written after it, flagged; then zeros.
	data, offs := buildFlagged(t, 1, 32*sectorSize, rec{100, 0}, rec{1000, 0}, rec{700, f}, rec{700, f})
	end := offs[3] + 2*sectorSize
	tests := []struct {
		name  string
		lose  [][2]int64 // sectors that never reached the disk
		after int
	}{
		{"spawn torn", [][2]int64{{offs[1] + sectorSize, offs[1] + 2*sectorSize}}, 2},
		{"spawn's first sector lost", [][2]int64{{offs[1], offs[1] + sectorSize}}, 2},
		{"spawn lost whole", [][2]int64{{offs[1], offs[2]}}, 2},
		{"spawn torn, the next record's first sector lost", [][2]int64{{offs[1] + 2*sectorSize, offs[1] + 3*sectorSize}, {offs[2], offs[2] + sectorSize}}, 1},
		{"spawn torn, the next record torn", [][2]int64{{offs[1] + sectorSize, offs[1] + 2*sectorSize}, {offs[2] + sectorSize, offs[3]}}, 2},
		{"spawn torn, the last record lost", [][2]int64{{offs[1] + sectorSize, offs[1] + 2*sectorSize}, {offs[3], end}}, 1},
		{"everything after the spawn's first sector lost", [][2]int64{{offs[1] + sectorSize, end}}, 0},
		{"spawn torn, the last record's first sector lost", [][2]int64{{offs[1] + sectorSize, offs[1] + 2*sectorSize}, {offs[3], offs[3] + sectorSize}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := bytes.Clone(data)
			for _, r := range tc.lose {
				clear(d[r[0]:r[1]])
			}
			sc, err := scanT(d, true)
			if err != nil {
				t.Fatalf("residue refused: %v", err)
			}
			if len(sc.records) != 1 || sc.end != offs[1] || sc.torn == nil || sc.torn.seq != 2 || sc.torn.off != offs[1] || sc.torn.after != tc.after {
				t.Fatalf("%d records, end %d, torn %+v", len(sc.records), sc.end, sc.torn)
			}
			if !allZero(d[sc.torn.end:]) {
				t.Fatalf("non-zero bytes after the residue's end %d", sc.torn.end)
			}
			if _, err := scanT(d, false); err == nil {
				t.Fatal("residue accepted in a segment that is not the last one")
			}
			checkClearSteps(t, d, sc)
		})
	}
}

// checkClearSteps applies the repair's steps one by one, each cut short
// at a random subset of its sectors (a crash during the repair): every
// state in between still reads as the same records and residue, and the
// repair leaves zeros.
func checkClearSteps(t *testing.T, data []byte, want segScan) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	d := bytes.Clone(data)
	for i, step := range clearSteps(want.torn) {
		for range 20 {
			cut := bytes.Clone(d)
			for _, r := range step {
				for s := r[0]; s < r[1]; s += sectorSize {
					if rng.Intn(2) == 0 {
						clear(cut[s:min(s+sectorSize, r[1])])
					}
				}
			}
			sc, err := scanT(cut, true)
			if err != nil || len(sc.records) != len(want.records) || sc.end != want.end || sc.torn != nil && sc.torn.off != want.torn.off {
				t.Fatalf("a crash in repair step %d leaves %d records, end %d, torn %+v, %v", i, len(sc.records), sc.end, sc.torn, err)
			}
		}
		for _, r := range step {
			clear(d[r[0]:r[1]])
		}
	}
	if !allZero(d[want.torn.off:]) {
		t.Fatal("the repair left non-zero bytes")
	}
}

// TestResidueNeedsTheWritersEvidence: what a power loss cannot leave stays
// damage, never a silent truncation of records that were acknowledged.
func TestResidueNeedsTheWritersEvidence(t *testing.T) {
	tests := []struct {
		name string
		recs []rec
		// damage zeros [off(rec i) + from sectors, + to sectors) for
		// each entry {i, from, to}, or flips a byte (to == -1).
		damage [][3]int
		want   string
	}{
		{"torn, then an unflagged record (a sync completed in between)",
			[]rec{{100, 0}, {1000, 0}, {100, 0}}, [][3]int{{1, 1, 2}}, "checksum mismatch"},
		{"first sector lost, then an unflagged record",
			[]rec{{100, 0}, {100, 0}, {100, 0}}, [][3]int{{1, 0, 1}}, "non-zero bytes"},
		{"torn, flagged, then an unflagged record",
			[]rec{{100, 0}, {1000, 0}, {100, f}, {100, 0}}, [][3]int{{1, 1, 2}}, "checksum mismatch"},
		{"a zeroed sector in an older, synced record",
			[]rec{{1000, 0}, {100, 0}, {100, f}}, [][3]int{{0, 1, 2}}, "checksum mismatch"},
		{"an older record's first sector zeroed, flagged records after",
			[]rec{{100, 0}, {100, 0}, {100, 0}, {100, f}}, [][3]int{{1, 0, 1}}, "non-zero bytes"},
		{"a flipped byte (no lost sector), then flagged records",
			[]rec{{100, 0}, {1000, 0}, {100, f}}, [][3]int{{1, 0, -1}}, "checksum mismatch"},
		{"a flipped byte in a single-sector record, then flagged records",
			[]rec{{100, 0}, {100, 0}, {100, f}}, [][3]int{{1, 0, -1}}, "checksum mismatch"},
		{"torn, then bytes no header explains",
			[]rec{{100, 0}, {1000, 0}, {1000, f}}, [][3]int{{1, 1, 2}, {2, 0, 1}}, "checksum mismatch"},
		{"first sector lost, then bytes no header explains",
			[]rec{{100, 0}, {1000, 0}}, [][3]int{{1, 0, 1}}, "non-zero bytes"},
		{"torn, then flagged records out of sequence",
			[]rec{{100, 0}, {1000, 0}, {100, f}}, [][3]int{{1, 1, 2}}, "checksum mismatch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, offs := buildFlagged(t, 1, 32*sectorSize, tc.recs...)
			if strings.Contains(tc.name, "out of sequence") {
				// Record 3 renumbered 5: not the record after the torn one.
				copy(data[offs[2]:], encodeRecord(5, f, bytes.Repeat([]byte{'c'}, 100)))
			}
			for _, dm := range tc.damage {
				off := offs[dm[0]]
				if dm[2] == -1 {
					data[off+recHeaderSize+10] ^= 0x40
					continue
				}
				clear(data[off+int64(dm[1])*sectorSize : off+int64(dm[2])*sectorSize])
			}
			sc, err := scanT(data, true)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("accepted as %d records, torn %+v (%v), want an error with %q", len(sc.records), sc.torn, err, tc.want)
			}
		})
	}
}

// TestUnknownRecordFlags: a flag this wf does not define is refused
// with a message that points at a newer wf, not guessed about.
func TestUnknownRecordFlags(t *testing.T) {
	data, _ := buildFlagged(t, 1, 8*sectorSize, rec{100, 0}, rec{100, 1 << 3})
	_, err := scanT(data, true)
	if err == nil || !strings.Contains(err.Error(), "flags 0x8 that this wf does not know (written by a newer wf?") {
		t.Fatalf("unknown flag: %v", err)
	}
}
