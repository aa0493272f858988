package statefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The checkpoint file says how much of the log Badger's tables already
// hold, so that older log segments can go. It has two 512-byte slots,
// written alternately and fsynced, so a crash while writing one leaves the
// other intact; the valid slot with the higher counter is current.
//
//	0  magic "WFCHKPT1"
//	8  counter (u64): slot = counter % 2
//	16 state identity (16 bytes)
//	32 flushed sequence (u64): every record up to it is in Badger tables
//	   listed in a synced MANIFEST
//	40 active segment (u64): first sequence of the newest log segment when
//	   the checkpoint was written; it and every later one must exist
//	48 MANIFEST inode (u64)
//	56 MANIFEST length (u64): a prefix of complete entries
//	64 CRC32C of that prefix (u32)
//	68 value log file id (u32) and
//	72 its valid length (u64) when the checkpoint was written (values up
//	   to there are synced)
//	80 schema version (u32)
//	84 CRC32C of bytes 0..84 (u32)
//	88.. zero

const (
	checkpointName  = "checkpoint"
	cpSlotSize      = 512
	cpFileSize      = 2 * cpSlotSize
	cpMagic         = "WFCHKPT1"
	cpUsed          = 88
	stateSchemaWith = 2 // the schema that has a log and checkpoints
)

type checkpoint struct {
	counter     uint64
	identity    [16]byte
	flushed     uint64
	active      uint64
	manifestIno uint64
	manifestLen uint64
	manifestCRC uint32
	vlogFid     uint32
	vlogEnd     uint64
	schema      uint32
}

func encodeCheckpoint(c checkpoint) []byte {
	b := make([]byte, cpSlotSize)
	copy(b, cpMagic)
	binary.BigEndian.PutUint64(b[8:], c.counter)
	copy(b[16:32], c.identity[:])
	binary.BigEndian.PutUint64(b[32:], c.flushed)
	binary.BigEndian.PutUint64(b[40:], c.active)
	binary.BigEndian.PutUint64(b[48:], c.manifestIno)
	binary.BigEndian.PutUint64(b[56:], c.manifestLen)
	binary.BigEndian.PutUint32(b[64:], c.manifestCRC)
	binary.BigEndian.PutUint32(b[68:], c.vlogFid)
	binary.BigEndian.PutUint64(b[72:], c.vlogEnd)
	binary.BigEndian.PutUint32(b[80:], c.schema)
	binary.BigEndian.PutUint32(b[84:], crc32c(b[:84]))
	return b
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	var c checkpoint
	if len(b) != cpSlotSize {
		return c, fmt.Errorf("slot is %d bytes, want %d", len(b), cpSlotSize)
	}
	if allZero(b) {
		return c, errEmptySlot
	}
	if string(b[:8]) != cpMagic {
		return c, errors.New("no WFCHKPT1 magic")
	}
	if crc32c(b[:84]) != binary.BigEndian.Uint32(b[84:]) {
		return c, errors.New("checksum mismatch")
	}
	if !allZero(b[cpUsed:]) {
		return c, errors.New("non-zero reserved bytes")
	}
	c.counter = binary.BigEndian.Uint64(b[8:])
	copy(c.identity[:], b[16:32])
	c.flushed = binary.BigEndian.Uint64(b[32:])
	c.active = binary.BigEndian.Uint64(b[40:])
	c.manifestIno = binary.BigEndian.Uint64(b[48:])
	c.manifestLen = binary.BigEndian.Uint64(b[56:])
	c.manifestCRC = binary.BigEndian.Uint32(b[64:])
	c.vlogFid = binary.BigEndian.Uint32(b[68:])
	c.vlogEnd = binary.BigEndian.Uint64(b[72:])
	c.schema = binary.BigEndian.Uint32(b[80:])
	if c.schema != stateSchemaWith {
		return c, fmt.Errorf("schema %d, this wf reads %d", c.schema, stateSchemaWith)
	}
	if c.active == 0 {
		return c, errors.New("names no active segment")
	}
	return c, nil
}

var errEmptySlot = errors.New("empty")

// decodeCheckpointFile picks the current slot of a checkpoint file's
// bytes. It fails when neither slot is valid; a slot that is not valid
// while the other is can only be a write cut short by a crash, since the
// two are written alternately.
func decodeCheckpointFile(b []byte) (checkpoint, error) {
	if len(b) != cpFileSize {
		return checkpoint{}, fmt.Errorf("is %d bytes, want %d", len(b), cpFileSize)
	}
	var best checkpoint
	var errs []error
	found := false
	for i := range 2 {
		c, err := decodeCheckpoint(b[i*cpSlotSize : (i+1)*cpSlotSize])
		if err == nil && c.counter%2 != uint64(i) {
			err = fmt.Errorf("counter %d does not belong in this slot", c.counter)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("slot %d: %w", i, err))
			continue
		}
		if !found || c.counter > best.counter {
			best, found = c, true
		}
	}
	if !found {
		return checkpoint{}, fmt.Errorf("has no valid slot (%w)", errors.Join(errs...))
	}
	return best, nil
}

// writeCheckpoint writes c into the slot its counter selects and syncs.
func writeCheckpoint(dir string, c checkpoint) error {
	path := filepath.Join(dir, checkpointName)
	f, err := openNoFollow(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != cpFileSize {
		// A new file: both slots, the other one empty, in one write.
		b := make([]byte, cpFileSize)
		copy(b[int(c.counter%2)*cpSlotSize:], encodeCheckpoint(c))
		if _, err := f.WriteAt(b, 0); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	} else if _, err := f.WriteAt(encodeCheckpoint(c), int64(c.counter%2)*cpSlotSize); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if fi.Size() != cpFileSize {
		return syncDir(dir)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
