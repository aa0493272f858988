package statefile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
)

// Log retention: checkpoints, and what the writer watches in db/.

// refreshDB looks at db/: the tables' size (for the space margin) and
// memtable logs that Badger created since the last look, whose blocks it
// allocates so that Badger's stores into them never fault.
func (s *Store) refreshDB() error {
	w := s.w
	w.unlisted = 0
	l, err := listDB(filepath.Join(s.dir, dbName))
	if err != nil {
		return err
	}
	w.lsmBytes.Store(l.sstBytes)
	seen := map[string]bool{}
	for _, p := range l.memPaths {
		seen[p] = true
		if w.allocated[p] {
			continue
		}
		if err := allocateFile(p); err != nil {
			return err
		}
		w.allocated[p] = true
	}
	for p := range w.allocated {
		if !seen[p] {
			delete(w.allocated, p)
		}
	}
	return nil
}

// maxRetainedLog is how much log a writer keeps before it makes Badger
// flush its memtables.
const maxRetainedLog = 4 * memTableSize

// flushSentinel is a key prefix no record uses; see forceFlush.
var flushSentinel = []byte{0xff, 'w', 'f', '-', 'f', 'l', 'u', 's', 'h'}

// forceFlush makes Badger flush every memtable into tables now. Badger has
// no call for that, but DropPrefix of a prefix that holds a key flushes
// the memtables first (synchronously); the sentinel key sorts after every
// table, so no table is rewritten for the drop.
func (s *Store) forceFlush() error {
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(flushSentinel, nil) }); err != nil {
		return fmt.Errorf("flush the database: %w", err)
	}
	if err := s.db.DropPrefix(flushSentinel); err != nil {
		return fmt.Errorf("flush the database: %w", err)
	}
	return nil
}

// rotate starts a new log segment for sequence first and takes the
// chance to checkpoint.
func (s *Store) rotate(first uint64, n int) error {
	// The checkpoint reads what Badger holds: let the applier catch up
	// first (rotations are rare).
	if err := s.w.waitApplied(); err != nil {
		return err
	}
	if err := s.w.wal.create(first, n); err != nil {
		return err
	}
	return s.checkpoint(false)
}

// checkpoint writes a checkpoint: the flushed sequence (advanced to the
// last candidate whose memtables Badger has flushed since; on Close, once
// Badger has flushed everything, to the last record applied), the active
// segment, and a fingerprint of the MANIFEST. Then the segments the
// tables hold are deleted.
func (s *Store) checkpoint(closing bool) error {
	w := s.w
	// A checkpoint may name records as flushed, so the log must hold them
	// durably (a spawn's record may not be synced yet): otherwise a power
	// loss could leave a log that ends before the checkpoint.
	if err := w.wal.syncPending(); err != nil {
		return err
	}
	dbDir := filepath.Join(s.dir, dbName)
	l, err := listDB(dbDir)
	if err != nil {
		return err
	}
	cp := w.cp
	cp.counter++
	cp.active = w.wal.first
	flushed := cp.flushed
	switch {
	case closing && len(l.memFids) == 0:
		flushed = w.lastMetaSeq()
	case !closing && w.cand.ok && (len(l.memFids) == 0 || l.memFids[0] > w.cand.memFid):
		flushed = max(flushed, w.cand.seq)
	}
	if !closing {
		w.cand.seq, w.cand.ok = w.lastMetaSeq(), true
		w.cand.memFid = 0
		if len(l.memFids) > 0 {
			w.cand.memFid = l.memFids[len(l.memFids)-1]
		}
		if flushed == cp.flushed && int64(len(w.wal.segs))*w.wal.segSize > maxRetainedLog {
			// Big values live in the value log and fill memtables slowly,
			// so Badger may not flush for a long time: make it, rather
			// than keep the log growing.
			if err := s.forceFlush(); err != nil {
				return err
			}
			if l, err = listDB(dbDir); err != nil {
				return err
			}
			if len(l.memFids) == 0 || l.memFids[0] > w.cand.memFid {
				flushed = w.cand.seq
			}
		}
	}
	if flushed > cp.flushed || cp.counter == 1 {
		if !closing {
			// Values in the value log are not synced by a flush: sync them
			// before the tables that point at them may lose their log.
			if err := s.db.Sync(); err != nil {
				return fmt.Errorf("sync the database: %w", err)
			}
		}
		cp.vlogFid, cp.vlogEnd = 0, 0
		if n := len(l.vlogFids); n > 0 {
			fid := l.vlogFids[n-1]
			f, err := openStateFile(s.dir, filepath.Join(dbDir, fmt.Sprintf("%06d.vlog", fid)), os.O_RDONLY, 0)
			if err != nil {
				return err
			}
			vs, err := scanVlog(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("read value log %06d.vlog: %w", fid, err)
			}
			cp.vlogFid, cp.vlogEnd = fid, uint64(vs.validEnd)
		}
		cp.flushed = flushed
	}
	mi, err := readManifest(s.dir, filepath.Join(dbDir, "MANIFEST"), true)
	if err != nil {
		return err
	}
	cp.manifestIno, cp.manifestLen, cp.manifestCRC = mi.ino, uint64(mi.valid), mi.crc
	if err := writeCheckpoint(s.dir, cp); err != nil {
		return err
	}
	w.cp = cp
	w.lsmBytes.Store(l.sstBytes)
	return w.wal.removeThrough(cp.flushed)
}
