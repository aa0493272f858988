package statefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
)

// The write-ahead log's on-disk format. Everything here is pure (bytes in,
// bytes out) so that it can be fuzzed; file handling is in wal.go.
//
// A segment (wal/<first sequence, 16 hex digits>.wal) is preallocated to its
// full size. Sector 0 is the segment header; records follow, each starting
// on a 512-byte sector boundary, so a record header never straddles a
// sector and a torn write can only cut a record between sectors:
//
//	segment header (sector 0):
//	  0  magic "WFWALSEG"
//	  8  format version (u32, 1)
//	  12 reserved (u32, 0)
//	  16 state identity (16 bytes)
//	  32 first sequence (u64)
//	  40 preallocated size of the segment file (u64)
//	  48 CRC32C of bytes 0..48 (u32)
//	  52.. zero
//
//	record (at a sector boundary):
//	  0  magic "WFR1" (u32)
//	  4  payload length (u32)
//	  8  sequence (u64)
//	  16 flags (u32): bit 0 (recAfterUnsynced) set when the record was
//	     written while the record before it was written but not yet
//	     fdatasynced; no other bit is defined
//	  20 CRC32C of bytes 0..20 (the header CRC, u32)
//	  24 payload (encoded ops)
//	  24+n CRC32C of bytes 0..24+n (u32)
//
// Integers are big-endian. The bytes between records (padding to the next
// sector) and after the last record are zero: the segment was
// preallocated, and wf never writes there.
//
// recAfterUnsynced is the writer's evidence for the one repair beyond a
// torn last record (scanResidue): a RecordSpawn is written without a
// sync, so the commit after it can reach the disk while a power loss
// loses part of the spawn's sectors. A flagged record says "no fdatasync
// completed between the record before me and me"; the writer syncs an
// unsynced record before it rotates or checkpoints, so a flagged record
// is never the first of a segment.

const (
	sectorSize       = 512
	segHeaderSize    = sectorSize
	segMagic         = "WFWALSEG"
	segVersion       = 1
	segHeaderUsed    = 52
	recMagic         = 0x57465231 // "WFR1"
	recHeaderSize    = 24
	recOverhead      = recHeaderSize + 4
	maxRecordPayload = 1 << 30

	recAfterUnsynced uint32 = 1 << 0
	knownRecordFlags        = recAfterUnsynced
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func crc32cNew() hash.Hash32 { return crc32.New(castagnoli) }

// segHeader is a decoded segment header.
type segHeader struct {
	identity [16]byte
	first    uint64
	size     uint64
}

func encodeSegHeader(h segHeader) []byte {
	b := make([]byte, segHeaderSize)
	copy(b, segMagic)
	binary.BigEndian.PutUint32(b[8:], segVersion)
	copy(b[16:32], h.identity[:])
	binary.BigEndian.PutUint64(b[32:], h.first)
	binary.BigEndian.PutUint64(b[40:], h.size)
	binary.BigEndian.PutUint32(b[48:], crc32c(b[:48]))
	return b
}

func decodeSegHeader(b []byte) (segHeader, error) {
	var h segHeader
	if len(b) < segHeaderSize {
		return h, fmt.Errorf("segment header is %d bytes, want %d", len(b), segHeaderSize)
	}
	if string(b[:8]) != segMagic {
		return h, errors.New("segment header has no WFWALSEG magic")
	}
	if crc32c(b[:48]) != binary.BigEndian.Uint32(b[48:]) {
		return h, errors.New("segment header checksum mismatch")
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != segVersion {
		return h, fmt.Errorf("segment format version %d, this wf reads %d", v, segVersion)
	}
	if !allZero(b[segHeaderUsed:segHeaderSize]) || binary.BigEndian.Uint32(b[12:]) != 0 {
		return h, errors.New("segment header has non-zero reserved bytes")
	}
	copy(h.identity[:], b[16:32])
	h.first = binary.BigEndian.Uint64(b[32:])
	h.size = binary.BigEndian.Uint64(b[40:])
	if h.first == 0 {
		return h, errors.New("segment header names sequence 0")
	}
	return h, nil
}

// encodeRecord returns the bytes of one record: header, payload, CRC.
func encodeRecord(seq uint64, flags uint32, payload []byte) []byte {
	return appendRecord(nil, seq, flags, payload)
}

func appendRecord(b []byte, seq uint64, flags uint32, payload []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, recMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint32(b, flags)
	b = binary.BigEndian.AppendUint32(b, crc32c(b[start:start+20]))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32c(b[start:]))
}

// appendRecordOps is appendRecord of the payload appendOps would make of
// every group in turn (n bytes: the sum of their opsSize), encoded in
// place.
func appendRecordOps(b []byte, seq uint64, flags uint32, groups [][]op, n int) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, recMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint32(b, flags)
	b = binary.BigEndian.AppendUint32(b, crc32c(b[start:start+20]))
	for _, g := range groups {
		b = appendOps(b, g)
	}
	return binary.BigEndian.AppendUint32(b, crc32c(b[start:]))
}

// recordSpan is the space a record of payload length n takes in a
// segment, padding to the next sector included.
func recordSpan(n int) int64 { return alignUp(int64(recOverhead + n)) }

func alignUp(n int64) int64 { return (n + sectorSize - 1) / sectorSize * sectorSize }

// walRecord is one decoded record.
type walRecord struct {
	seq     uint64
	flags   uint32
	payload []byte
	// off is where the record starts in its segment.
	off int64
}

// tornRecord describes the end of the last segment that a crash cut
// short (scanResidue): the first record not kept (seq, at off; its header
// may be lost), and everything after it up to end, nothing but zeros after
// that. None of it was ever acknowledged as synced, so the writer clears
// [off, end) and appends at off.
type tornRecord struct {
	seq      uint64
	off, end int64
	// heads are the offsets of the record headers still intact in
	// [off, end), in order: the repair zeros them last (clearTail).
	heads []int64
	// after is how many flagged records after the first were found (and
	// are cleared with it).
	after int
}

// segScan is what a scan of one segment's bytes found.
type segScan struct {
	records []walRecord
	// end is the offset after the last valid record (padded to a sector):
	// where the next record goes.
	end  int64
	torn *tornRecord
}

// scanSegment decodes the records of one segment held entirely in data
// (header included). It accepts a torn tail only when last is true; any
// other anomaly is an error saying what and where. The sequence numbers
// must increase by one from h.first.
func scanSegment(data []byte, h segHeader, last bool) (segScan, error) {
	var sc segScan
	if uint64(len(data)) != h.size {
		return sc, fmt.Errorf("is %d bytes, but was created with %d (truncated or extended)", len(data), h.size)
	}
	if len(data) < segHeaderSize || len(data)%sectorSize != 0 {
		return sc, fmt.Errorf("size %d is not a whole number of sectors", len(data))
	}
	off := int64(segHeaderSize)
	next := h.first
	for {
		sc.end = off
		if off+recHeaderSize > int64(len(data)) {
			// No room for another record: whatever is left must be zero.
			if !allZero(data[off:]) {
				return sc, fmt.Errorf("has non-zero bytes at offset %d after its last record", off)
			}
			return sc, nil
		}
		hdr := data[off : off+recHeaderSize]
		if allZero(hdr) {
			i := firstNonZero(data[off:])
			if i < 0 {
				return sc, nil
			}
			// The record's first sector may never have reached the disk
			// while later records did.
			if last {
				if end, heads, ok := scanResidue(data, off, next); ok && len(heads) > 0 {
					sc.torn = &tornRecord{seq: next, off: off, end: end, heads: heads, after: len(heads)}
					return sc, nil
				}
			}
			return sc, fmt.Errorf("has non-zero bytes at offset %d after its last record (sequence %d)", off+int64(i), next-1)
		}
		n, seq, flags, err := decodeRecordHeader(hdr)
		if err != nil {
			return sc, fmt.Errorf("record at offset %d (sequence %d expected): %v", off, next, err)
		}
		if seq != next {
			return sc, fmt.Errorf("record at offset %d has sequence %d, want %d", off, seq, next)
		}
		ext := int64(recOverhead) + int64(n)
		if off+ext > int64(len(data)) {
			return sc, fmt.Errorf("record %d at offset %d runs past the end of the segment", seq, off)
		}
		rec := data[off : off+ext]
		body := int64(recHeaderSize) + int64(n)
		pad := min(off+alignUp(ext), int64(len(data)))
		if crc32c(rec[:body]) != binary.BigEndian.Uint32(rec[body:]) {
			if last && hasZeroSector(data, off, off+ext) && allZero(data[off+ext:pad]) {
				if end, heads, ok := scanResidue(data, pad, seq+1); ok {
					sc.torn = &tornRecord{seq: seq, off: off, end: end, heads: append([]int64{off}, heads...), after: len(heads)}
					return sc, nil
				}
			}
			return sc, fmt.Errorf("record %d at offset %d: checksum mismatch", seq, off)
		}
		sc.records = append(sc.records, walRecord{seq: seq, flags: flags, payload: rec[recHeaderSize:body], off: off})
		next++
		if i := firstNonZero(data[off+ext : pad]); i >= 0 {
			return sc, fmt.Errorf("has non-zero padding at offset %d after record %d", off+ext+int64(i), seq)
		}
		off = pad
	}
}

// scanResidue reads what follows a record a crash cut short (torn, or its
// first sector lost) in the last segment, from off, the next record
// expected being next. It accepts only crash residue: records whose
// headers carry recAfterUnsynced, in increasing sequence, each whole or
// itself cut short (its checksum is not checked: none of it is kept), then
// nothing but zeros. Where a header is zero but bytes follow (another
// record whose first sector was lost) it looks for the next header at
// each sector; bytes it skips must come after a flagged record or
// before one.
//
// Why that is safe: the record cut short was written and never reached
// the disk whole, so no fdatasync completed after its write (on a disk
// that honours fdatasync); every flagged record was written while the
// record before it was unsynced, so none of them was acknowledged as
// synced either, and clearing them all loses nothing acknowledged. A
// record written after a completed sync carries no flag, so a lost sector
// among older, synced records (a bad block) is followed by an unflagged
// record and stays damage. Like the torn last record, a bad block in
// the last unsynced run of the log cannot be told from a crash.
func scanResidue(data []byte, off int64, next uint64) (end int64, heads []int64, ok bool) {
	size := int64(len(data))
	searching, junk := false, false
	for {
		if off >= size || allZero(data[off:]) {
			// Bytes no header explains at the very end: the tail of a
			// record whose first sector was lost. Written after a flagged
			// record, it was no more acknowledged than that one (only a
			// second lost sector, on its header, could hide that it was
			// written after a sync); with no flagged record seen, it is
			// damage.
			return min(off, size), heads, !junk || len(heads) > 0
		}
		hdr := data[off : off+recHeaderSize]
		n, seq, flags, err := decodeRecordHeader(hdr)
		if err != nil || seq < next || !searching && seq != next || off+int64(recOverhead)+int64(n) > size {
			if !searching && !allZero(hdr) {
				return 0, nil, false
			}
			// A record whose first sector was lost: its length is unknown.
			searching = true
			junk = junk || !allZero(data[off:off+sectorSize])
			off += sectorSize
			continue
		}
		if flags&recAfterUnsynced == 0 {
			return 0, nil, false
		}
		heads = append(heads, off)
		next, searching, junk = seq+1, false, false
		off = min(off+alignUp(int64(recOverhead)+int64(n)), size)
	}
}

// decodeRecordHeader checks a record header and returns the payload
// length, sequence and flags.
func decodeRecordHeader(hdr []byte) (n uint32, seq uint64, flags uint32, err error) {
	if binary.BigEndian.Uint32(hdr[0:]) != recMagic {
		return 0, 0, 0, errors.New("not a record header (bad magic)")
	}
	if crc32c(hdr[:20]) != binary.BigEndian.Uint32(hdr[20:]) {
		return 0, 0, 0, errors.New("record header checksum mismatch")
	}
	flags = binary.BigEndian.Uint32(hdr[16:])
	if unknown := flags &^ knownRecordFlags; unknown != 0 {
		// Its checksum holds, so a wf that knows more wrote it: not
		// damage, but not something to guess about either.
		return 0, 0, 0, fmt.Errorf("record header has flags %#x that this wf does not know (written by a newer wf? open the state with that one)", unknown)
	}
	n = binary.BigEndian.Uint32(hdr[4:])
	if n > maxRecordPayload {
		return 0, 0, 0, fmt.Errorf("record payload length %d is implausible", n)
	}
	return n, binary.BigEndian.Uint64(hdr[8:]), flags, nil
}

// hasZeroSector reports whether some sector of the record occupying
// data[off:end] is entirely zero within the record: part of it never
// reached the disk.
func hasZeroSector(data []byte, off, end int64) bool {
	for s := off; s < end; s += sectorSize {
		if allZero(data[s:min(s+sectorSize, end)]) {
			return true
		}
	}
	return false
}

func allZero(b []byte) bool { return firstNonZero(b) < 0 }

var zeroBlock [64 << 10]byte

// firstNonZero returns the index of the first non-zero byte, or -1.
func firstNonZero(b []byte) int {
	base := 0
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			for i, c := range b[:n] {
				if c != 0 {
					return base + i
				}
			}
		}
		b, base = b[n:], base+n
	}
	return -1
}

// The payload of a record is a sequence of ops:
//
//	kind (1 byte: 0 set, 1 delete, 2 delete prefix)
//	key length (uvarint), key
//	for set: value length (uvarint), value

func appendOps(b []byte, ops []op) []byte {
	for _, o := range ops {
		b = append(b, byte(o.kind))
		b = binary.AppendUvarint(b, uint64(len(o.key)))
		b = append(b, o.key...)
		if o.kind == opSet {
			b = binary.AppendUvarint(b, uint64(len(o.val)))
			b = append(b, o.val...)
		}
	}
	return b
}

// opsSize is the length of appendOps(nil, ops).
func opsSize(ops []op) int {
	n := 0
	for _, o := range ops {
		n += 1 + uvarintLen(len(o.key)) + len(o.key)
		if o.kind == opSet {
			n += uvarintLen(len(o.val)) + len(o.val)
		}
	}
	return n
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// decodeOps decodes a payload. The ops alias payload.
func decodeOps(payload []byte) ([]op, error) {
	var ops []op
	b := payload
	for len(b) > 0 {
		kind := opKind(b[0])
		if kind > opDeletePrefix {
			return nil, fmt.Errorf("op %d: unknown kind %d", len(ops), kind)
		}
		b = b[1:]
		key, rest, err := readBytes(b)
		if err != nil {
			return nil, fmt.Errorf("op %d key: %w", len(ops), err)
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("op %d: empty key", len(ops))
		}
		o := op{kind: kind, key: key}
		b = rest
		if kind == opSet {
			if o.val, b, err = readBytes(b); err != nil {
				return nil, fmt.Errorf("op %d value: %w", len(ops), err)
			}
		}
		ops = append(ops, o)
	}
	return ops, nil
}

func readBytes(b []byte) (v, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, errors.New("bad length")
	}
	b = b[k:]
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("length %d beyond the end of the record", n)
	}
	return b[:n:n], b[n:], nil
}
