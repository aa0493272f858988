package statefile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
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
type lockFile struct {
	f *os.File
}

func acquireLock(dir, path, command string) (*lockFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			le := &LockedError{Path: dir}
			if data, rerr := os.ReadFile(path); rerr == nil {
				le.PID, le.Since, le.Command = parseLock(data)
			}
			return nil, le
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "pid %d\nstarted %s\n", os.Getpid(), time.Now().Format(time.RFC3339))
	if command != "" {
		fmt.Fprintf(&b, "command %s\n", strings.ReplaceAll(command, "\n", " "))
	}
	if err := writeLockInfo(f, b.Bytes()); err != nil {
		_ = flock(f, syscall.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("write lock file %s: %w", path, err)
	}
	return &lockFile{f: f}, nil
}

func writeLockInfo(f *os.File, data []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(data, 0)
	return err
}

func (l *lockFile) release() error {
	// Emptying the file first means a reader that races the next holder
	// sees no details rather than ours.
	terr := l.f.Truncate(0)
	uerr := flock(l.f, syscall.LOCK_UN)
	cerr := l.f.Close()
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
