package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// walWriter appends records to the log's active segment. It is used only
// by the group-commit leader (and by Open and Close), so it needs no lock.
// The log is never mmapped: records go in with one pwrite each, and a
// segment is preallocated when it is created, so a full disk shows up as
// ENOSPC there, never in the middle of a record.
type walWriter struct {
	stateDir string
	dir      string // wal/
	identity [16]byte
	segSize  int64

	f     *os.File // the active segment
	first uint64   // its first sequence
	size  int64
	off   int64 // where the next record goes
	// segs are the first sequences of the segments on disk that the
	// checkpoint still needs, the active one last.
	segs []uint64
	buf  []byte
	// unsynced: a record has been written since the last fdatasync (a
	// RecordSpawn's). The next record then carries recAfterUnsynced, the
	// evidence the reader needs to tell a power loss's residue from damage.
	unsynced bool
	// spare is the next segment, being preallocated in the background
	// once the active one is half full (nil: not started): a rotation
	// then only writes a header and renames, instead of writing 4 MiB of
	// zeros while every committer waits.
	spare chan spareSegment
}

// spareSegment is a preallocated, synced file of size bytes under
// wal/spare.tmp (a name every writer's Open removes as a leftover), or
// the error that preparing it met.
type spareSegment struct {
	f    *os.File
	size int64
	err  error
}

const spareName = "spare.tmp"

// prepareSpare starts preallocating the next segment, if it has not
// started yet.
func (w *walWriter) prepareSpare() {
	if w.spare != nil {
		return
	}
	ch := make(chan spareSegment, 1)
	w.spare = ch
	size := w.segSize
	go func() {
		f, err := w.newSpare(size)
		ch <- spareSegment{f: f, size: size, err: err}
	}()
}

func (w *walWriter) newSpare(size int64) (*os.File, error) {
	path := filepath.Join(w.dir, spareName)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err := openNoFollow(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := preallocate(f, size); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return f, nil
}

// takeSpare waits for the spare segment and returns it if it is ready
// and size bytes; otherwise it removes it and returns nil (create then
// makes a segment itself, and meets any error, a full disk say, there).
func (w *walWriter) takeSpare(size int64) *os.File {
	if w.spare == nil {
		return nil
	}
	sp := <-w.spare
	w.spare = nil
	if sp.err == nil && sp.size == size {
		return sp.f
	}
	if sp.f != nil {
		sp.f.Close()
		os.Remove(filepath.Join(w.dir, spareName))
	}
	return nil
}

// defaultSegmentSize is the preallocated size of a log segment: small
// enough to create quickly and to fit a small disk, large enough that
// rotations (each a checkpoint opportunity) stay rare.
const defaultSegmentSize = 4 << 20

// fits reports whether a record with an n-byte payload fits in the active
// segment.
func (w *walWriter) fits(n int) bool { return w.f != nil && w.off+recordSpan(n) <= w.size }

// create makes a new segment starting at sequence first, big enough for a
// record with an n-byte payload, and makes it the active one. The file is
// built under a temporary name, preallocated, its header written and
// synced, then renamed into place, so a crash never leaves a half-made
// segment under a real name.
func (w *walWriter) create(first uint64, n int) error {
	// A segment that is not the last one holds no crash residue
	// (scanResidue runs on the last one only), and a flagged record is
	// never the first of a segment: sync what the old one has unsynced.
	if err := w.syncPending(); err != nil {
		return err
	}
	size := max(w.segSize, segHeaderSize+recordSpan(n))
	name := filepath.Join(w.dir, segmentName(first))
	if f := w.takeSpare(size); f != nil {
		return w.install(f, filepath.Join(w.dir, spareName), name, first, size)
	}
	tmp := name + ".tmp"
	f, err := openNoFollow(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Left by a crash while creating this very segment.
		if err := os.Remove(tmp); err != nil {
			return fmt.Errorf("remove %s: %w", tmp, err)
		}
		f, err = openNoFollow(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return fmt.Errorf("create log segment: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := preallocate(f, size); err != nil {
		return fmt.Errorf("preallocate log segment %s (%d bytes): %w", filepath.Base(name), size, err)
	}
	ok = true
	return w.install(f, tmp, name, first, size)
}

// install writes the header of a preallocated segment file at tmp, syncs
// it, renames it to name and makes it the active segment. On error the
// file is removed.
func (w *walWriter) install(f *os.File, tmp, name string, first uint64, size int64) (err error) {
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.WriteAt(encodeSegHeader(segHeader{identity: w.identity, first: first, size: uint64(size)}), 0); err != nil {
		return fmt.Errorf("write log segment header: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync log segment: %w", err)
	}
	if _, err := os.Lstat(name); err == nil {
		return fmt.Errorf("create log segment: %s already exists", name)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("create log segment: %w", err)
	}
	if err := syncDir(w.dir); err != nil {
		return err
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f, w.first, w.size, w.off = f, first, size, segHeaderSize
	w.segs = append(w.segs, first)
	return nil
}

// preallocate gives f size bytes of real blocks, so later writes inside
// it never need space: fallocate reserves them (and fails at once with
// ENOSPC on a full disk), then zeros are written over them, because a
// write into fallocated (unwritten) extents makes every fdatasync journal
// an extent conversion, while overwriting written zeros is a pure data
// write: about twice the syncs per second on ext4.
func preallocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if err != nil && !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.ENOSYS) {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			return err
		}
	}
	return nil
}

// resume makes an existing segment the active one, appending at off.
func (w *walWriter) resume(path string, h segHeader, off int64, segs []uint64) error {
	f, err := openNoFollow(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open log segment: %w", err)
	}
	w.f, w.first, w.size, w.off = f, h.first, int64(h.size), off
	w.segs = segs
	return nil
}

// write encodes the ops of groups (n bytes of payload: opsSize) as the
// record seq straight into the write buffer and writes it at the end of
// the active segment (which must have room: see fits), with one pwrite.
// It does not sync: until sync, the record is unsynced and the next one
// is flagged.
func (w *walWriter) write(seq uint64, groups [][]op, n int) error {
	size := recOverhead + n
	if cap(w.buf) < size {
		w.buf = make([]byte, 0, size)
	}
	var flags uint32
	if w.unsynced {
		flags = recAfterUnsynced
	}
	rec := appendRecordOps(w.buf[:0], seq, flags, groups, n)
	// Unsynced from the moment the write starts: a failed write may have
	// reached the file in part.
	w.unsynced = true
	if _, err := w.f.WriteAt(rec, w.off); err != nil {
		return fmt.Errorf("write log record %d: %w", seq, err)
	}
	w.off += alignUp(int64(size))
	return nil
}

// wantsSpare reports whether the next segment should be prepared now: the
// active one is half full and none is being prepared.
func (w *walWriter) wantsSpare() bool { return w.spare == nil && w.f != nil && w.off > w.size/2 }

func (w *walWriter) sync() error {
	if w.f == nil {
		return nil
	}
	if err := fdatasync(int(w.f.Fd())); err != nil {
		return fmt.Errorf("sync log segment %s: %w", segmentName(w.first), err)
	}
	w.unsynced = false
	return nil
}

// syncPending syncs the active segment if a record was written to it
// since the last sync.
func (w *walWriter) syncPending() error {
	if !w.unsynced {
		return nil
	}
	return w.sync()
}

func fdatasync(fd int) error {
	for {
		err := syscall.Fdatasync(fd)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// clearTail overwrites the crash residue at the end of the active segment
// with zeros: the one repair. It is made in steps (clearSteps), each
// synced, so that a crash during it leaves a segment the next scan still
// reads as the same residue.
func (w *walWriter) clearTail(t *tornRecord) error {
	for _, step := range clearSteps(t) {
		for _, r := range step {
			if err := w.writeZeros(r[0], r[1]); err != nil {
				return err
			}
		}
		if err := w.sync(); err != nil {
			return err
		}
	}
	return nil
}

// clearSteps are the ranges clearTail zeros, step by step: first
// everything but the sectors holding intact record headers, then those,
// one at a time and the last first. Zeroing a header before what follows
// it could leave bytes after a zero header that no flagged header
// explains (damage); this way every intermediate state is a torn record
// followed by flagged headers and zeros.
func clearSteps(t *tornRecord) [][][2]int64 {
	var first [][2]int64
	from := t.off
	for _, h := range t.heads {
		if h > from {
			first = append(first, [2]int64{from, h})
		}
		from = min(h+sectorSize, t.end)
	}
	if t.end > from {
		first = append(first, [2]int64{from, t.end})
	}
	steps := [][][2]int64{first}
	for i := len(t.heads) - 1; i >= 0; i-- {
		h := t.heads[i]
		steps = append(steps, [][2]int64{{h, min(h+sectorSize, t.end)}})
	}
	return steps
}

func (w *walWriter) writeZeros(off, end int64) error {
	for off < end {
		n := min(end-off, int64(len(zeroBlock)))
		if _, err := w.f.WriteAt(zeroBlock[:n], off); err != nil {
			return fmt.Errorf("clear the log's torn end: %w", err)
		}
		off += n
	}
	return nil
}

// removeThrough deletes the segments whose every record is at or before
// flushed (the checkpoint's), never the active one.
func (w *walWriter) removeThrough(flushed uint64) error {
	keep := 0
	for keep+1 < len(w.segs) && w.segs[keep+1] <= flushed+1 {
		keep++
	}
	var errs []error
	for _, first := range w.segs[:keep] {
		if err := os.Remove(filepath.Join(w.dir, segmentName(first))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	w.segs = append(w.segs[:0], w.segs[keep:]...)
	return errors.Join(errs...)
}

func (w *walWriter) close() error {
	if w.spare != nil {
		// Not needed any more: the next writer would remove it anyway.
		if sp := <-w.spare; sp.f != nil {
			sp.f.Close()
			os.Remove(filepath.Join(w.dir, spareName))
		}
		w.spare = nil
	}
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
