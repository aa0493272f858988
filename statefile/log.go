package statefile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// logMaxBytes is the size past which wf.log is rotated: it becomes
// wf.log.1 (replacing the previous one) and a new wf.log is started, so
// the engine's log never takes more than about twice this.
const logMaxBytes = 4 << 20

// Log levels of the engine's log.
const (
	LogInfo    = "INFO"
	LogWarning = "WARNING"
	LogError   = "ERROR"
)

// fileLogger writes the engine's log, wf.log: what the engine decided
// (Store.Logf: the run's start, recovery, orphans, the lock, errors) and
// Badger's warnings and errors, never to the terminal the TUI is drawing
// on. One line per entry: time (RFC 3339, milliseconds, with its zone),
// level, source, message. Only a writer has the file; a reader's logger
// writes nothing (readers change nothing in the state directory) but
// still passes Badger's lines to Logf.
type fileLogger struct {
	mu       sync.Mutex
	f        *os.File
	size     int64
	stateDir string
	path     string
	extra    func(format string, args ...any)
}

func openLog(stateDir, path string, extra func(string, ...any)) (*fileLogger, error) {
	f, err := openLogFile(stateDir, path)
	if err != nil {
		return nil, err
	}
	l := &fileLogger{f: f, stateDir: stateDir, path: path, extra: extra}
	if fi, err := f.Stat(); err == nil {
		l.size = fi.Size()
	}
	return l, nil
}

func openLogFile(stateDir, path string) (*os.File, error) {
	f, err := openStateFile(stateDir, path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if err := tightenFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("open log: %w", err)
	}
	return f, nil
}

// line appends one entry. Errors writing the log are ignored: the log
// serves the operator and must never stop the engine.
func (l *fileLogger) line(level, source, msg string) {
	msg = strings.TrimRight(msg, "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	entry := fmt.Sprintf("%s %s %s: %s\n", time.Now().Format("2006-01-02T15:04:05.000Z07:00"), level, source, msg)
	if l.size > 0 && l.size+int64(len(entry)) > logMaxBytes {
		l.rotate()
	}
	n, _ := l.f.WriteString(entry)
	l.size += int64(n)
}

// rotate renames wf.log to wf.log.1 (rename replaces a file, or a link
// planted there, without following it) and starts a new wf.log. If that
// fails, the log goes on in the file it has.
func (l *fileLogger) rotate() {
	old := filepath.Join(filepath.Dir(l.path), logOldName)
	if err := os.Rename(l.path, old); err != nil {
		return
	}
	f, err := openLogFile(l.stateDir, l.path)
	if err != nil {
		return
	}
	_ = l.f.Close()
	l.f, l.size = f, 0
}

func (l *fileLogger) write(level, format string, args []any) {
	msg := fmt.Sprintf(format, args...)
	l.line(level, "badger", msg)
	if l.extra != nil {
		l.extra("badger %s: %s", level, strings.TrimRight(msg, "\n"))
	}
}

// Errorf and Warningf make a fileLogger Badger's logger.
func (l *fileLogger) Errorf(format string, args ...any)   { l.write(LogError, format, args) }
func (l *fileLogger) Warningf(format string, args ...any) { l.write(LogWarning, format, args) }

// Infof and Debugf are dropped: Badger is chatty at those levels.
func (l *fileLogger) Infof(string, ...any)  {}
func (l *fileLogger) Debugf(string, ...any) {}

func (l *fileLogger) close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}

// Logf appends a line from the engine (level LogInfo, LogWarning or
// LogError) to the state's log, wf.log, rotated past 4 MiB into
// wf.log.1. Callers never pass secret values: the log names activities,
// attempts, error types and decisions, not outputs or messages an
// activity produced. A read-only Store writes nothing.
func (s *Store) Logf(level, format string, args ...any) {
	s.log.line(level, "engine", fmt.Sprintf(format, args...))
}
