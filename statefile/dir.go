package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DamageError says that a state directory holds damaged state: a file
// flipped, truncated, missing, or from somewhere else. Nothing was changed.
type DamageError struct {
	Dir  string // the state directory
	What string // what is wrong, e.g. "wal/0000000000000001.wal: record 7 at offset 4096: checksum mismatch"
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("state in %s is damaged: %s (nothing was changed; wf state check -state-dir %s says more)", e.Dir, e.What, e.Dir)
}

// UnsafeError says that wf refuses a state directory that someone else
// could tamper with: owned by another user, writable by group or others,
// or holding a symbolic link or special file where wf keeps its files.
type UnsafeError struct {
	Dir  string
	What string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("refusing state directory %s: %s", e.Dir, e.What)
}

func damagef(dir, format string, args ...any) error {
	return &DamageError{Dir: dir, What: fmt.Sprintf(format, args...)}
}

func unsafef(dir, format string, args ...any) error {
	return &UnsafeError{Dir: dir, What: fmt.Sprintf(format, args...)}
}

// checkOwnDir checks that path (which exists) is a directory owned by this
// user and not writable by group or others. The state directory itself may
// be reached through a symbolic link the user made (follow true); the
// directories wf creates inside it may not.
func checkOwnDir(stateDir, path string, follow bool) (fs.FileInfo, error) {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(path)
	if err != nil {
		return nil, err
	}
	rel := relName(stateDir, path)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, unsafef(stateDir, "%s is a symbolic link (wf never follows links inside a state directory; remove it)", rel)
	case !fi.IsDir():
		if rel == "." {
			return nil, fmt.Errorf("%s exists and is not a directory", path)
		}
		return nil, unsafef(stateDir, "%s is not a directory", rel)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Geteuid() {
		return nil, unsafef(stateDir, "%s is owned by uid %d, not by you (uid %d)", relOrDir(rel), st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, unsafef(stateDir, "%s is writable by group or others (mode %04o); run chmod 700 %s", relOrDir(rel), fi.Mode().Perm(), path)
	}
	return fi, nil
}

func relOrDir(rel string) string {
	if rel == "." {
		return "the directory"
	}
	return rel
}

func relName(dir, path string) string {
	r, err := filepath.Rel(dir, path)
	if err != nil {
		return path
	}
	return r
}

// lstatEntry returns what an entry of the state directory is, refusing
// anything but a regular file. A missing entry is (nil, nil).
func lstatRegular(stateDir, path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(stateDir, path, fi)
	}
	return fi, nil
}

func notRegular(stateDir, path string, fi fs.FileInfo) error {
	rel := relName(stateDir, path)
	if fi.Mode()&fs.ModeSymlink != 0 {
		return unsafef(stateDir, "%s is a symbolic link (wf never follows links inside a state directory; remove it)", rel)
	}
	return unsafef(stateDir, "%s is not a regular file (%s)", rel, fi.Mode().Type())
}

// openNoFollow opens a file that must be a regular file and not a
// symbolic link (O_NOFOLLOW: a planted link is refused, never followed,
// and a dangling one never creates its target).
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link (wf never follows links inside a state directory; remove it)", path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return f, nil
}

// openStateFile is openNoFollow for an entry of the state directory; a
// symbolic link or special file is an *UnsafeError.
func openStateFile(stateDir, path string, flag int, perm os.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, notRegular(stateDir, path, fi)
	}
	f, err := openNoFollow(path, flag, perm)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return nil, notRegular(stateDir, path, fi)
		}
		return nil, err
	}
	return f, nil
}

// tightenFile makes a regular file of wf's mode 0600 (Badger creates its
// files 0666 less the umask).
func tightenFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o600 {
		return f.Chmod(0o600)
	}
	return nil
}

// tightenDir sets mode 0600 on every regular file of dir and 0700 on dir.
// Links and anything else are left alone (and refused at open).
func tightenDir(dir string) error {
	if err := chmodIfNeeded(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := chmodIfNeeded(filepath.Join(dir, e.Name()), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func chmodIfNeeded(path string, mode os.FileMode) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().Perm() == mode {
		return nil
	}
	return os.Chmod(path, mode)
}
