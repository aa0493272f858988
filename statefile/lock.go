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
	// Exited is set when the holder the lock file names is no longer
	// running, yet the lock stayed held through exitedHolderGrace: a
	// process it started (or one that has not written its details yet)
	// has the lock's open file.
	Exited bool
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
	if e.Exited {
		return fmt.Sprintf("state is locked by another process: another wf is using %s (the lock file names %s, which is no longer running: a process it started may still hold the lock, or a new holder has not written its details yet)", e.Path, who.String())
	}
	return fmt.Sprintf("state is locked by %s: another wf is using %s", who.String(), e.Path)
}

// exitedHolderGrace is how long a lock is waited for, whatever the
// timeout, when the holder the lock file names has exited. Its lock then
// outlives it only in a child caught between fork and exec when the
// holder was killed (the child shares the lock's open file until its
// exec closes it, close-on-exec): milliseconds, longer on a loaded
// machine. Without the wait, `kill -9` of an apply that was starting an
// exec activity made the next `wf apply` fail on a lock nobody holds a
// moment later: an engine failure that would be the user's.
const exitedHolderGrace = 3 * time.Second

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
	start := time.Now()
	deadline := start.Add(timeout)
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
			// Past the caller's timeout: only a holder that has
			// exited is waited for, and only through the grace (the
			// lock file is read again at every turn, so a new holder
			// that writes its details ends the wait at once).
			le := readHolder(dir, path)
			if le.PID <= 0 || processRunning(le.PID) {
				f.Close()
				return nil, le
			}
			if left = time.Until(start.Add(exitedHolderGrace)); left <= 0 {
				f.Close()
				le.Exited = true
				return nil, le
			}
			wait = min(wait, 20*time.Millisecond)
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// readHolder is the LockedError for dir, with the holder's details from
// the lock file when it has written them.
func readHolder(dir, path string) *LockedError {
	le := &LockedError{Path: dir}
	if g, err := openNoFollow(path, os.O_RDONLY, 0); err == nil {
		if data, err := io.ReadAll(io.LimitReader(g, 4096)); err == nil {
			le.PID, le.Since, le.Command = parseLock(data)
		}
		g.Close()
	}
	return le
}

// processRunning reports whether pid is a live process: not one that
// does not exist, and not a zombie (a killed holder its parent has not
// reaped yet, whose files the kernel has already closed). A process of
// another user counts as running; so does an unrelated process that was
// given the PID again, which only makes the caller fail at once, as it
// did before the grace existed.
func processRunning(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: kill(2) said it exists
	}
	// The state follows the command name, which is in parentheses and
	// may itself hold ") ".
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
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
