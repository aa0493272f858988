package statefile

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

var testIdentity = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// buildSegment lays out a segment of the given size holding records with
// the given payload sizes, numbered from first.
func buildSegment(t testing.TB, first uint64, size int64, payloads ...int) ([]byte, []int64) {
	t.Helper()
	h := segHeader{identity: testIdentity, first: first, size: uint64(size)}
	data := make([]byte, size)
	copy(data, encodeSegHeader(h))
	off := int64(segHeaderSize)
	var offs []int64
	for i, n := range payloads {
		payload := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		rec := encodeRecord(first+uint64(i), 0, payload)
		if off+int64(len(rec)) > size {
			t.Fatalf("record %d does not fit", i)
		}
		copy(data[off:], rec)
		offs = append(offs, off)
		off += alignUp(int64(len(rec)))
	}
	return data, offs
}

func scanT(data []byte, last bool) (segScan, error) {
	h, err := decodeSegHeader(data)
	if err != nil {
		return segScan{}, err
	}
	return scanSegment(data, h, last)
}

func TestScanSegmentWhole(t *testing.T) {
	data, offs := buildSegment(t, 7, 16*sectorSize, 10, 600, 0, 1500)
	sc, err := scanT(data, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.records) != 4 || sc.torn != nil {
		t.Fatalf("%d records, torn %v", len(sc.records), sc.torn)
	}
	for i, r := range sc.records {
		if r.seq != 7+uint64(i) || r.off != offs[i] {
			t.Errorf("record %d: seq %d off %d", i, r.seq, r.off)
		}
	}
	if want := offs[3] + alignUp(recOverhead+1500); sc.end != want {
		t.Errorf("end %d, want %d", sc.end, want)
	}
}

// TestTornTails cuts the last record of a segment at every sector boundary
// inside it, as a crash (a short write, or power loss with sectors written
// in order) leaves it: each is accepted as a torn tail, and the records
// before it are all there.
func TestTornTails(t *testing.T) {
	sizes := []int{1, 500, 1000, 5000}
	for _, n := range sizes {
		data, offs := buildSegment(t, 1, 32*sectorSize, 100, 200, n)
		start := offs[2]
		ext := int64(recOverhead + n)
		for cut := start + sectorSize; cut < start+ext; cut += sectorSize {
			for _, shape := range []string{"prefix", "gap"} {
				t.Run(fmt.Sprintf("n=%d/cut=%d/%s", n, cut-start, shape), func(t *testing.T) {
					d := bytes.Clone(data)
					switch shape {
					case "prefix": // everything from cut on never written
						clear(d[cut:])
					case "gap": // one sector lost, the ones after it written
						clear(d[cut:min(cut+sectorSize, start+ext)])
					}
					sc, err := scanT(d, true)
					if err != nil {
						t.Fatalf("torn tail refused: %v", err)
					}
					if sc.torn == nil || sc.torn.seq != 3 || sc.torn.off != start || len(sc.records) != 2 || sc.end != start {
						t.Fatalf("torn %+v, %d records, end %d", sc.torn, len(sc.records), sc.end)
					}
					// Not in a segment that is not the last one.
					if _, err := scanT(d, false); err == nil {
						t.Fatal("torn record accepted in a middle segment")
					}
				})
			}
		}
	}
	t.Run("the whole record lost", func(t *testing.T) {
		data, offs := buildSegment(t, 1, 8*sectorSize, 1, 100)
		clear(data[offs[1] : offs[1]+sectorSize])
		sc, err := scanT(data, true)
		if err != nil || len(sc.records) != 1 || sc.torn != nil {
			t.Fatalf("a record whose sector never reached the disk is the end of the log: %v %+v", err, sc)
		}
	})
}

// TestDamageIsNeverTorn: a record whose checksum fails without a lost
// sector, or that has anything after it, is damage, not a torn tail.
func TestDamageIsNeverTorn(t *testing.T) {
	data, offs := buildSegment(t, 1, 32*sectorSize, 100, 3000, 200)
	tests := []struct {
		name string
		edit func(d []byte)
		want string
	}{
		{"cut inside a sector", func(d []byte) { clear(d[offs[2]+recHeaderSize+100 : offs[2]+recHeaderSize+200]) }, "checksum mismatch"},
		{"torn record followed by data", func(d []byte) {
			clear(d[offs[1]+sectorSize : offs[1]+2*sectorSize])
		}, "checksum mismatch"},
		{"garbage after the log", func(d []byte) { d[len(d)-1] = 1 }, "non-zero bytes"},
		{"header neither zero nor valid", func(d []byte) { d[offs[2]+2] ^= 0x40 }, "record at offset"},
		{"sequence skipped", func(d []byte) {
			copy(d[offs[2]:], encodeRecord(9, 0, bytes.Repeat([]byte{'c'}, 200)))
		}, "has sequence 9, want 3"},
		{"non-zero padding", func(d []byte) { d[offs[0]+recOverhead+100+3] = 7 }, "non-zero padding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := bytes.Clone(data)
			tt.edit(d)
			_, err := scanT(d, true)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

// TestEveryFlipIsCaught flips each bit position of a small segment (one
// byte at a time, several values) and requires an error every time:
// never fewer records and no error.
func TestEveryFlipIsCaught(t *testing.T) {
	data, _ := buildSegment(t, 1, 6*sectorSize, 40, 700, 3)
	for i := range data {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			d := bytes.Clone(data)
			d[i] ^= x
			sc, err := scanT(d, true)
			if err == nil {
				t.Fatalf("flip 0x%02x at %d accepted: %d records, torn %v", x, i, len(sc.records), sc.torn)
			}
		}
	}
}

func TestTruncatedSegment(t *testing.T) {
	data, _ := buildSegment(t, 1, 8*sectorSize, 100)
	for _, n := range []int{0, 14, segHeaderSize - 1, segHeaderSize, len(data) / 2, len(data) - 1} {
		if _, err := scanT(data[:n], true); err == nil {
			t.Errorf("segment truncated to %d bytes accepted", n)
		}
	}
	big := append(bytes.Clone(data), make([]byte, sectorSize)...)
	if _, err := scanT(big, true); err == nil || !strings.Contains(err.Error(), "truncated or extended") {
		t.Errorf("extended segment: %v", err)
	}
}

func TestOpsRoundTrip(t *testing.T) {
	ops := []op{
		{kind: opSet, key: []byte("a1"), val: []byte(`{"x":1}`)},
		{kind: opSet, key: []byte("T\x00k"), val: []byte{}},
		{kind: opDelete, key: []byte("T\x00k")},
		{kind: opDeletePrefix, key: []byte("i")},
	}
	got, err := decodeOps(appendOps(nil, ops))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(ops) {
		t.Fatalf("got %v, want %v", got, ops)
	}
	for _, bad := range [][]byte{{9}, {0}, {0, 5, 'a'}, {0, 1, 'a', 9}, {1, 0}} {
		if _, err := decodeOps(bad); err == nil {
			t.Errorf("decodeOps(%v) accepted", bad)
		}
	}
}

func TestCheckpointSlots(t *testing.T) {
	c1 := checkpoint{counter: 1, identity: testIdentity, flushed: 10, active: 5, manifestIno: 3, manifestLen: 100, manifestCRC: 7, vlogFid: 2, vlogEnd: 20, schema: stateSchemaWith}
	c2 := c1
	c2.counter, c2.flushed = 2, 20
	file := make([]byte, cpFileSize)
	copy(file[cpSlotSize:], encodeCheckpoint(c1))
	copy(file, encodeCheckpoint(c2))
	got, err := decodeCheckpointFile(file)
	if err != nil || got != c2 {
		t.Fatalf("got %+v, %v; want the newer slot", got, err)
	}
	// A damaged newer slot falls back to the older one (that is what a
	// crash while writing it leaves).
	d := bytes.Clone(file)
	d[40] ^= 1
	if got, err := decodeCheckpointFile(d); err != nil || got != c1 {
		t.Fatalf("got %+v, %v; want the older slot", got, err)
	}
	// Both damaged, or the file cut: an error.
	d[cpSlotSize+33] ^= 1
	if _, err := decodeCheckpointFile(d); err == nil {
		t.Fatal("two damaged slots accepted")
	}
	for _, n := range []int{0, 14, cpSlotSize, cpFileSize - 1} {
		if _, err := decodeCheckpointFile(file[:n]); err == nil {
			t.Errorf("checkpoint cut to %d bytes accepted", n)
		}
	}
	if _, err := decodeCheckpointFile(make([]byte, cpFileSize)); err == nil {
		t.Error("an all-zero checkpoint accepted")
	}
}

// TestRecordOpsEncodedInPlace: the leader encodes a batch's ops straight
// into the record; the bytes are those of appendOps then appendRecord.
func TestRecordOpsEncodedInPlace(t *testing.T) {
	groups := [][]op{
		{{kind: opSet, key: []byte("a"), val: []byte("1")}, {kind: opDelete, key: []byte("b")}},
		{},
		{{kind: opDeletePrefix, key: []byte("c/")}, {kind: opSet, key: bytes.Repeat([]byte("k"), 200), val: bytes.Repeat([]byte("v"), 70000)}},
	}
	var payload []byte
	n := 0
	for _, g := range groups {
		payload = appendOps(payload, g)
		n += opsSize(g)
	}
	if n != len(payload) {
		t.Fatalf("opsSize says %d bytes, appendOps wrote %d", n, len(payload))
	}
	if got, want := appendRecordOps([]byte("prefix"), 7, 0, groups, n), append([]byte("prefix"), encodeRecord(7, 0, payload)...); !bytes.Equal(got, want) {
		t.Fatal("appendRecordOps differs from appendRecord of appendOps")
	}
}
