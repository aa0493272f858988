package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A reader changes nothing in the state directory and creates nothing in
// it. Badger cannot be trusted with that even read-only (it deletes table
// files its MANIFEST does not list, and refuses memtable logs that are not
// cut at their last entry), so a reader opens Badger on a private
// directory outside the state (under os.TempDir) holding symbolic links to
// the MANIFEST, key registry, listed tables and value logs: whatever
// Badger does there happens to the links. The log records after the
// checkpoint are not in those tables yet, so they are laid over Badger in
// memory (see overlay).

func openReader(dir string, opts Options) (_ *Store, err error) {
	s := &Store{dir: dir, opts: opts, log: &fileLogger{extra: opts.Logf}}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil // no state yet: it reads as empty
	case err != nil:
		return nil, fmt.Errorf("open state: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("open state: %s exists and is not a directory", dir)
	}
	if _, err := checkOwnDir(dir, dir, true); err != nil {
		return nil, err
	}
	lock, err := acquireLock(dir, false, opts.LockTimeout)
	if err != nil {
		return nil, wrapOpen(dir, err)
	}
	s.lock = lock
	defer func() {
		if err != nil {
			s.closeReader()
		}
	}()
	si, err := inspect(dir)
	if err != nil {
		return nil, wrapOpen(dir, err)
	}
	s.info = si
	switch si.kind {
	case kindEmpty:
		return s, nil
	case kindLegacy:
		err = s.openLegacyCopy(si)
	default:
		err = s.openView(si)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// openView opens Badger read-only on links to the checked files and lays
// the log records after the checkpoint over it.
func (s *Store) openView(si *stateInfo) error {
	s.identity = si.cp.identity
	s.id = si.identity()
	view, err := os.MkdirTemp("", "wf-view-")
	if err != nil {
		return fmt.Errorf("open state in %s: %w", s.dir, err)
	}
	s.viewDir = view
	dbDir := filepath.Join(s.dir, dbName)
	links := []string{filepath.Join(dbDir, "MANIFEST")}
	if si.keyReg {
		links = append(links, filepath.Join(dbDir, "KEYREGISTRY"))
	}
	links = append(links, si.tables...)
	for _, v := range si.vlogs {
		links = append(links, v.path)
	}
	for _, p := range links {
		if err := os.Symlink(p, filepath.Join(view, filepath.Base(p))); err != nil {
			return fmt.Errorf("open state in %s: %w", s.dir, err)
		}
	}
	opt := badgerOptions(view, s.log).WithReadOnly(true)
	db, err := openBadger(s.dir, opt)
	if err != nil {
		return err
	}
	s.db = db
	if len(si.records) > 0 {
		ov := newOverlay()
		for _, r := range si.records {
			ops, err := decodeOps(r.payload)
			if err != nil {
				return damagef(s.dir, "log record %d: %v", r.seq, err)
			}
			ov.apply(ops)
		}
		ov.seal()
		s.ov = ov
	}
	return nil
}

// openLegacyCopy reads a schema-1 state (written by a wf from before the
// log). Its memtable logs hold committed data, and Badger opens those only
// for writing, so the reader copies db/ to a private directory and opens
// the copy. Legacy states are small and a writer migrates them on its
// first open.
func (s *Store) openLegacyCopy(si *stateInfo) error {
	view, err := os.MkdirTemp("", "wf-view-")
	if err != nil {
		return fmt.Errorf("open state in %s: %w", s.dir, err)
	}
	s.viewDir = view
	dbDir := filepath.Join(s.dir, dbName)
	entries, err := os.ReadDir(dbDir)
	if err != nil {
		return fmt.Errorf("open state in %s: %w", s.dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		if err := copyFile(s.dir, filepath.Join(dbDir, e.Name()), filepath.Join(view, e.Name())); err != nil {
			return fmt.Errorf("open state in %s: copy %s: %w", s.dir, e.Name(), err)
		}
	}
	for _, p := range si.unlisted {
		// Crash residue: Badger would delete it from the copy anyway.
		os.Remove(filepath.Join(view, filepath.Base(p)))
	}
	db, err := openBadger(s.dir, badgerOptions(view, s.log))
	if err != nil {
		return err
	}
	s.db = db
	id, err := legacyIdentity(s.dir, db)
	if err != nil {
		return err
	}
	s.id = id
	return nil
}

// copyFile copies a regular file of the state, leaving holes where it is
// zero (Badger's memtable logs are mostly preallocated zeros).
func copyFile(stateDir, src, dst string) error {
	in, err := openStateFile(stateDir, src, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	return copySparse(in, dst)
}

func copySparse(in *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := in.ReadAt(buf, off)
		if n > 0 && !allZero(buf[:n]) {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				out.Close()
				return werr
			}
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			out.Close()
			return err
		}
	}
	if err := out.Truncate(off); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (s *Store) closeReader() error {
	var errs []error
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close state database: %w", err))
		}
		s.db = nil
	}
	if s.viewDir != "" && strings.HasPrefix(filepath.Base(s.viewDir), "wf-view-") {
		if err := os.RemoveAll(s.viewDir); err != nil {
			errs = append(errs, err)
		}
		s.viewDir = ""
	}
	errs = append(errs, s.lock.release())
	return errors.Join(errs...)
}
