package statefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Full disks. The log is safe by construction: segments are preallocated
// and written with plain writes, so ENOSPC comes back from fallocate when
// a segment is created. Badger is not: it mmaps its memtable logs, value
// logs and tables, creating them sparse, and a store into a page the file
// system cannot allocate kills the process with SIGBUS. So before every
// write batch (and before a writer opens) the store checks with statfs
// that the file system has room for everything Badger could write before
// the next check, and refuses the batch otherwise:
//
//   - a new memtable log (2 x memTableSize, allocated right away, below),
//   - the table a full memtable is flushed to (<= memTableSize),
//   - compaction output (<= the tables it compacts: all of them at worst),
//   - the batch itself, twice (memtable log and value log),
//   - 1 MiB for Badger's DISCARD file and the like.
//
// Where it can, the store also allocates the blocks of the memtable logs
// Badger has created (fallocate over their whole size), so stores into
// them never fault. What remains is the time between a check and Badger's
// next new file: another process filling the disk in that window can
// still make a flush or compaction fault. docs/durability.md says so.

// memTableSize is 8 MiB: with 4 MiB a table is flushed into L0 (and L0
// compacted into L1) twice as often for the same records, about 15 % more
// CPU per commit (docs/performance/statefile.md); 16 MiB
// would need a 49 MiB margin, refusing to write on a 48 MiB file system
// that 8 MiB (25 MiB) still fills in between (TestFullDiskNeverCrashes).
const memTableSize = 8 << 20

func spaceMargin(lsmBytes int64, batch int) int64 {
	return 3*memTableSize + lsmBytes + 2*int64(batch) + 1<<20
}

// noSpaceError wraps ENOSPC with the state directory and what was needed.
func noSpaceError(dir string, free, need int64) error {
	return fmt.Errorf("state in %s: %w (%s free, wf keeps %s free so that the database can always finish what it writes); free some space and run wf apply again: nothing committed is lost",
		dir, syscall.ENOSPC, fmtBytes(free), fmtBytes(need))
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// checkSpace fails with ENOSPC unless the file system of dir has room for
// a batch of n bytes and what Badger may write until the next check.
func checkSpace(stateDir, dir string, lsmBytes int64, n int) error {
	free, err := freeBytes(dir)
	if err != nil {
		return nil // cannot tell: let the write find out
	}
	if need := spaceMargin(lsmBytes, n); free < need {
		return noSpaceError(stateDir, free, need)
	}
	return nil
}

// dbListing is what is in db/ right now.
type dbListing struct {
	memFids  []int // ascending
	memPaths []string
	sstBytes int64
	vlogFids []uint32 // ascending
}

func listDB(dbDir string) (dbListing, error) {
	var l dbListing
	entries, err := os.ReadDir(dbDir)
	if err != nil {
		return l, err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".mem"):
			if fid, err := strconv.Atoi(strings.TrimSuffix(name, ".mem")); err == nil {
				l.memFids = append(l.memFids, fid)
				l.memPaths = append(l.memPaths, filepath.Join(dbDir, name))
			}
		case strings.HasSuffix(name, ".sst"):
			if fi, err := e.Info(); err == nil {
				l.sstBytes += fi.Size()
			}
		case strings.HasSuffix(name, ".vlog"):
			if fid, err := strconv.ParseUint(strings.TrimSuffix(name, ".vlog"), 10, 32); err == nil {
				l.vlogFids = append(l.vlogFids, uint32(fid))
			}
		}
	}
	sort.Ints(l.memFids)
	sort.Strings(l.memPaths)
	sort.Slice(l.vlogFids, func(i, j int) bool { return l.vlogFids[i] < l.vlogFids[j] })
	return l, nil
}

// allocateFile gives a file Badger mmaps real blocks over its whole size.
// A file that vanished meanwhile (flushed and deleted) is fine.
func allocateFile(path string) error {
	f, err := openNoFollow(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, fi.Size())
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return nil // nothing to be done here
	}
	if err != nil {
		return fmt.Errorf("allocate %s: %w", filepath.Base(path), err)
	}
	return nil
}
