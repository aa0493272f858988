package statefile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockedError is returned by Open when another wf holds the state
// directory's lock. The holder's details come from the lock file and may be
// zero when the holder had not written them yet.
type LockedError struct {
	Path    string // the state directory
	PID     int
	Since   time.Time
	Command string
}

func (e *LockedError) Error() string {
	var who strings.Builder
	if e.PID > 0 {
		fmt.Fprintf(&who, "PID %d", e.PID)
	} else {
		who.WriteString("another process")
	}
	var details []string
	if e.Command != "" {
		details = append(details, e.Command)
	}
	if !e.Since.IsZero() {
		details = append(details, "since "+e.Since.Format(time.RFC3339))
	}
	if len(details) > 0 {
		fmt.Fprintf(&who, " (%s)", strings.Join(details, ", "))
	}
	return fmt.Sprintf("state is locked by %s: another wf is using %s", who.String(), e.Path)
}

// lockFile is the held flock on wf.lock. flock locks belong to the open file
// description, so a second Open in the same process conflicts too, and the
// kernel drops the lock when the holder dies: a crash never leaves a stale
// lock behind.
//
// A writer holds it exclusively and writes its details into the file; a
// reader holds it shared and writes nothing. So readers never block each
// other, a writer waits for (or, without a timeout, fails on) readers, and
// a reader fails on a running writer.
type lockFile struct {
	f *os.File // nil: a reader of a state that has no lock file
	// wrote is set once the holder's details are in the file.
	wrote bool
}

// acquireLock takes wf.lock in dir: exclusively (creating the file) for a
// writer, shared for a reader. A reader of a state without a lock file
// holds nothing: it has nothing to create the file with, and no writer has
// ever opened that state. With timeout > 0 it waits up to that long.
func acquireLock(dir string, exclusive bool, timeout time.Duration) (*lockFile, error) {
	path := filepath.Join(dir, lockName)
	var f *os.File
	var err error
	if exclusive {
		f, err = openStateFile(dir, path, os.O_RDWR|os.O_CREATE, 0o600)
	} else {
		f, err = openStateFile(dir, path, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return &lockFile{}, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		err = flock(f, how|syscall.LOCK_NB)
		if err == nil {
			return &lockFile{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, 250*time.Millisecond)
	}
	f.Close()
	le := &LockedError{Path: dir}
	if g, err := openNoFollow(path, os.O_RDONLY, 0); err == nil {
		if data, err := io.ReadAll(io.LimitReader(g, 4096)); err == nil {
			le.PID, le.Since, le.Command = parseLock(data)
		}
		g.Close()
	}
	return nil, le
}

// writeInfo records the holder (a writer, once it has checked the state)
// so that a second wf can say who has the state.
func (l *lockFile) writeInfo(command string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pid %d\nstarted %s\n", os.Getpid(), time.Now().Format(time.RFC3339))
	if command != "" {
		fmt.Fprintf(&b, "command %s\n", strings.ReplaceAll(command, "\n", " "))
	}
	if err := tightenFile(l.f); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	l.wrote = true
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	if _, err := l.f.WriteAt(b.Bytes(), 0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	return nil
}

func (l *lockFile) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	var terr error
	if l.wrote {
		// Emptying the file first means a reader that races the next
		// holder sees no details rather than ours.
		terr = l.f.Truncate(0)
	}
	uerr := flock(l.f, syscall.LOCK_UN)
	cerr := l.f.Close()
	l.f = nil
	if err := errors.Join(terr, uerr, cerr); err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// parseLock reads "pid N", "started RFC3339" and "command ..." lines;
// anything missing or malformed stays zero.
func parseLock(data []byte) (pid int, since time.Time, command string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		switch name {
		case "pid":
			pid, _ = strconv.Atoi(value)
		case "started":
			since, _ = time.Parse(time.RFC3339, value)
		case "command":
			command = value
		}
	}
	return pid, since, command
}
