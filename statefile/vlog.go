package statefile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Badger's value log holds the values too big for its LSM tree (records
// over valueThreshold: large activity outputs). Its files are
// <fid, 6 digits>.vlog: a 20-byte header (8-byte key id, 0 without
// encryption, and a 12-byte IV) and entries:
//
//	meta, user meta (1 byte each), key length, value length, expiry
//	(uvarints), key, value, CRC32C of all that (4 bytes, big-endian)
//
// Badger's writer, when it opens, truncates the newest file after its last
// valid entry. The checkpoint records the newest file and its valid length
// after a sync, so everything before that point is durable and must be
// intact; after it, in the newest file, a torn tail is crash residue whose
// values the log replays.

const vlogHeaderSize = 20

// vlogScan is what scanVlog found.
type vlogScan struct {
	size      int64
	validEnd  int64 // after the last valid entry
	cleanTail bool  // every byte after validEnd is zero
}

func scanVlog(f *os.File) (vlogScan, error) {
	var vs vlogScan
	fi, err := f.Stat()
	if err != nil {
		return vs, err
	}
	vs.size = fi.Size()
	if vs.size < vlogHeaderSize {
		return vs, fmt.Errorf("is %d bytes, shorter than its header", vs.size)
	}
	var hdr [vlogHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return vs, err
	}
	if binary.BigEndian.Uint64(hdr[:8]) != 0 {
		return vs, errors.New("was written with encryption, which wf never uses")
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, vlogHeaderSize, vs.size-vlogHeaderSize), 256<<10)
	off := int64(vlogHeaderSize)
	for {
		n, ok := readVlogEntry(r)
		if !ok {
			break
		}
		off += n
	}
	vs.validEnd = off
	vs.cleanTail, err = zeroAfter(f, off, vs.size)
	return vs, err
}

// readVlogEntry reads one entry the way Badger's replay does and returns
// its length, or false at the first entry that is not whole and valid.
func readVlogEntry(r *bufio.Reader) (int64, bool) {
	h := crc32cNew()
	tee := io.TeeReader(r, h)
	var hb [2 + 3*binary.MaxVarintLen64]byte
	if _, err := io.ReadFull(tee, hb[:2]); err != nil {
		return 0, false
	}
	n := int64(2)
	br := byteReader{tee, &n}
	klen, err1 := binary.ReadUvarint(br)
	vlen, err2 := binary.ReadUvarint(br)
	_, err3 := binary.ReadUvarint(br)
	if err1 != nil || err2 != nil || err3 != nil || klen == 0 || klen > 1<<16 || vlen > 1<<31 {
		return 0, false
	}
	if _, err := io.CopyN(io.Discard, tee, int64(klen+vlen)); err != nil {
		return 0, false
	}
	var crc [4]byte
	if _, err := io.ReadFull(r, crc[:]); err != nil {
		return 0, false
	}
	if binary.BigEndian.Uint32(crc[:]) != h.Sum32() {
		return 0, false
	}
	return n + int64(klen+vlen) + 4, true
}

type byteReader struct {
	r io.Reader
	n *int64
}

func (b byteReader) ReadByte() (byte, error) {
	var c [1]byte
	if _, err := io.ReadFull(b.r, c[:]); err != nil {
		return 0, err
	}
	*b.n++
	return c[0], nil
}

// zeroAfter reports whether f holds only zero bytes in [off, size),
// skipping holes (a sparse file is zero there by definition).
func zeroAfter(f *os.File, off, size int64) (bool, error) {
	const seekData, seekHole = 3, 4
	buf := make([]byte, 256<<10)
	fd := int(f.Fd())
	for off < size {
		data, err := syscall.Seek(fd, off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			return true, nil // nothing but holes up to the end
		}
		if err != nil {
			data = off // no SEEK_DATA here: read everything
		}
		hole, err := syscall.Seek(fd, data, seekHole)
		if err != nil || hole > size {
			hole = size
		}
		for p := data; p < hole; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), hole-p)], p)
			if n > 0 && !allZero(buf[:n]) {
				return false, nil
			}
			p += int64(n)
			if err == io.EOF {
				return true, nil
			}
			if err != nil {
				return false, err
			}
		}
		off = hole
	}
	return true, nil
}
