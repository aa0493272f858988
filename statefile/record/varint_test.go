package record

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestVarintsAsBinaryPackage: the decoder's varints accept and refuse
// what encoding/binary's do (its own loop and one-byte path replaced
// binary.Uvarint and binary.Varint), overflow and truncation included.
func TestVarintsAsBinaryPackage(t *testing.T) {
	var inputs [][]byte
	for _, v := range []uint64{0, 1, 63, 64, 127, 128, 255, 300, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		inputs = append(inputs, binary.AppendUvarint(nil, v))
	}
	inputs = append(inputs,
		nil, []byte{0x80}, []byte{0xff, 0xff},
		// 10 bytes with a last byte of 1 (fits) and of 2 (overflows).
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
		[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
		[]byte{0x80, 0x00}, // not minimal: both accept it
	)
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		inputs = append(inputs, b)
	}
	for _, in := range inputs {
		wantU, nU := binary.Uvarint(in)
		d := binDecoder{b: in}
		gotU := d.uint()
		if (nU > 0) != (d.err == nil) || nU > 0 && (gotU != wantU || d.i != nU) {
			t.Fatalf("uint(%x) = %d at %d, err %v; binary.Uvarint: %d, %d", in, gotU, d.i, d.err, wantU, nU)
		}
		wantI, nI := binary.Varint(in)
		d = binDecoder{b: in}
		gotI := d.int()
		if (nI > 0) != (d.err == nil) || nI > 0 && (gotI != wantI || d.i != nI) {
			t.Fatalf("int(%x) = %d at %d, err %v; binary.Varint: %d, %d", in, gotI, d.i, d.err, wantI, nI)
		}
	}
}

// TestASCIIWordAtATime: ascii checks eight and four bytes at a time; a
// byte of 0x80 or more anywhere, at any length, is found.
func TestASCIIWordAtATime(t *testing.T) {
	for n := range 40 {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(i%26)
		}
		if !ascii(b) {
			t.Fatalf("ascii(%q) = false", b)
		}
		for i := range b {
			for _, c := range []byte{0x80, 0xc3, 0xff} {
				c0 := b[i]
				b[i] = c
				if ascii(b) {
					t.Fatalf("ascii(%q) = true with 0x%x at %d", b, c, i)
				}
				b[i] = c0
			}
		}
	}
	if !ascii([]byte{utf8.RuneSelf - 1}) {
		t.Fatal("0x7f is ASCII")
	}
}
