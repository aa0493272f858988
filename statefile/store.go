// Package statefile is wf's durable state: an embedded Badger database in
// the state directory (default <config dir>/.wf), guarded by a lock file
// that names the holder. Writes go through Commit, which merges concurrent
// callers into one synced transaction (group commit), so many activities
// finishing together cost one fsync, not one each.
package statefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/wf-engine/wf/statefile/record"
)

// Names inside a state directory.
const (
	gitignoreName = ".gitignore"
	lockName      = "wf.lock"
	dbName        = "db"
	logName       = "wf.log"
)

// Options tunes Open. The zero value is ready to use.
type Options struct {
	// ReadOnly refuses writes through this Store (Commit and
	// DeleteInstance fail). The directory is still locked exclusively:
	// Badger cannot share it with a writer.
	ReadOnly bool
	// Command is recorded in the lock file so that a second wf can say who
	// holds the state (e.g. "wf apply").
	Command string
	// Logf, when set, also receives Badger's warnings and errors.
	Logf func(format string, args ...any)
}

// ErrClosed is returned by every method of a Store after Close.
var ErrClosed = errors.New("state store is closed")

// ErrReadOnly is returned by writes to a Store opened with ReadOnly.
var ErrReadOnly = errors.New("state store is open read-only")

// Store is an open state directory. Its methods are safe for concurrent
// use.
type Store struct {
	dir  string
	opts Options
	db   *badger.DB
	lock *lockFile
	log  *fileLogger
	// id is the state's random identity (see ID).
	id string

	// closeMu is held shared by every read and write and exclusively by
	// Close, so Close waits for work in flight and nothing touches a closed
	// database.
	closeMu sync.RWMutex
	closed  bool

	// Group commit: see Commit.
	mu      sync.Mutex
	pending []*commitReq
	writing bool
	// lingerDone, when set, is closed once lingerTarget callers queue.
	lingerDone   chan struct{}
	lingerTarget int
	// lastBatch is the number of Commit calls in the previous batch.
	lastBatch int
	// Counters for tests and benchmarks: batches written and the Commit
	// calls they carried.
	batches, batchedReqs atomic.Int64
}

// Open opens (creating if needed) the state directory dir and takes its
// lock. A directory locked by another wf yields a *LockedError.
func Open(dir string, opts Options) (_ *Store, err error) {
	if dir == "" {
		return nil, errors.New("open state: empty directory name")
	}
	if err := prepareDir(dir); err != nil {
		return nil, fmt.Errorf("open state: %w", err)
	}
	lock, err := acquireLock(dir, filepath.Join(dir, lockName), opts.Command)
	if err != nil {
		var le *LockedError
		if errors.As(err, &le) {
			return nil, err
		}
		return nil, fmt.Errorf("open state in %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = lock.release()
		}
	}()

	dbDir := filepath.Join(dir, dbName)
	if err := checkDBDir(dbDir); err != nil {
		return nil, fmt.Errorf("open state in %s: %w", dir, err)
	}
	logger, err := openLog(filepath.Join(dir, logName), opts.Logf)
	if err != nil {
		return nil, fmt.Errorf("open state in %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = logger.close()
		}
	}()

	db, err := openBadger(badgerOptions(dbDir, logger))
	if err != nil {
		return nil, fmt.Errorf("open state in %s: database in %s is unreadable: %w", dir, dbDir, err)
	}
	s := &Store{dir: dir, opts: opts, db: db, lock: lock, log: logger}
	if err := s.checkSchema(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.loadID(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// prepareDir creates the state directory with its .gitignore, or checks
// that an existing one is a directory.
func prepareDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
	default:
		return err
	}
	gi := filepath.Join(dir, gitignoreName)
	if _, err := os.Lstat(gi); errors.Is(err, fs.ErrNotExist) {
		// "*" keeps the whole state directory, this file included, out of
		// git even when the user runs `git add -A`.
		if err := os.WriteFile(gi, []byte("*\n"), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", gi, err)
		}
	}
	return nil
}

// checkDBDir refuses to let Badger initialise a directory that already
// holds something else: a non-empty db/ always has a MANIFEST.
func checkDBDir(dbDir string) error {
	fi, err := os.Stat(dbDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: not a wf state directory", dbDir)
	}
	entries, err := os.ReadDir(dbDir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dbDir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dbDir, "MANIFEST")); err != nil {
		return fmt.Errorf("%s has files but no Badger MANIFEST: not a wf state directory", dbDir)
	}
	return checkTables(dbDir)
}

// checkTables opens every table the way Badger will, but in this
// goroutine: Badger opens tables in goroutines of its own, where a corrupt
// table's panic cannot be recovered and would kill the process.
func checkTables(dbDir string) error {
	paths, err := filepath.Glob(filepath.Join(dbDir, "*.sst"))
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := checkTable(p); err != nil {
			return fmt.Errorf("database in %s is unreadable: table %s: %w", dbDir, filepath.Base(p), err)
		}
	}
	return nil
}

func checkTable(path string) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	// The table is never DecrRef'd: dropping its last reference deletes
	// the file. Unmapping is all the clean-up a read-only open needs.
	defer func() {
		if cerr := mf.Close(-1); err == nil && cerr != nil {
			err = cerr
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt table (%s)", firstLine(fmt.Sprint(r)))
		}
	}()
	// Reading a block depends on the options the store uses (compression
	// is not recorded in the table), so mirror them.
	opt := badgerOptions(filepath.Dir(path), nil)
	_, err = table.OpenTable(mf, table.Options{
		Compression:        opt.Compression,
		BlockSize:          opt.BlockSize,
		BloomFalsePositive: opt.BloomFalsePositive,
		ChkMode:            opt.ChecksumVerificationMode,
	})
	return err
}

func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "==") {
			return line
		}
	}
	return strings.TrimSpace(s)
}

func badgerOptions(dbDir string, logger *fileLogger) badger.Options {
	return badger.DefaultOptions(dbDir).
		WithSyncWrites(true).
		WithLogger(logger).
		WithLoggingLevel(badger.WARNING).
		WithMetricsEnabled(false).
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithValueLogFileSize(64 << 20).
		// Records are small JSON documents: keep them all in the LSM so a
		// read never touches the value log.
		WithValueThreshold(64 << 10).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(0).
		WithNumVersionsToKeep(1).
		WithNumCompactors(2).
		WithNumLevelZeroTables(3).
		WithNumLevelZeroTablesStall(8).
		WithCompression(options.None).
		// Commit serialises writers itself; conflict tracking would only
		// cost memory.
		WithDetectConflicts(false)
}

// openBadger converts Badger's panics on corrupt files into errors.
func openBadger(opt badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("badger panicked: %v", r)
		}
	}()
	return badger.Open(opt)
}

// checkSchema verifies the schema version, writing it into a new store.
func (s *Store) checkSchema() error {
	var stored []byte
	empty := true
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(keySchema)
		if err == nil {
			stored, err = item.ValueCopy(nil)
			return err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		it.Rewind()
		empty = !it.Valid()
		return nil
	})
	if err != nil {
		return fmt.Errorf("open state in %s: read schema version: %w", s.dir, err)
	}
	if stored == nil {
		if !empty {
			return fmt.Errorf("open state in %s: the database has data but no wf schema version: not a wf state directory", s.dir)
		}
		if s.opts.ReadOnly {
			return nil
		}
		err := s.db.Update(func(txn *badger.Txn) error {
			return txn.Set(keySchema, []byte(strconv.Itoa(record.SchemaVersion)))
		})
		if err != nil {
			return fmt.Errorf("open state in %s: write schema version: %w", s.dir, err)
		}
		return nil
	}
	v, err := strconv.Atoi(string(stored))
	if err != nil {
		return fmt.Errorf("open state in %s: schema version %q is not a number: not a wf state directory", s.dir, stored)
	}
	switch {
	case v > record.SchemaVersion:
		return fmt.Errorf("state in %s uses schema %d; this wf supports %d: upgrade wf", s.dir, v, record.SchemaVersion)
	case v != record.SchemaVersion:
		return fmt.Errorf("state in %s uses schema %d; this wf supports %d: the state is too old for this wf (remove it or use an older wf)", s.dir, v, record.SchemaVersion)
	}
	return nil
}

// loadID reads the state's identity, creating it in a state that has none
// (a new state, or one written by a wf from before identities).
func (s *Store) loadID() error {
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(keyID)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if !validID(string(v)) {
			return fmt.Errorf("state identity %q is not %d hex digits", v, idLen)
		}
		s.id = string(v)
		return nil
	})
	if err != nil {
		return fmt.Errorf("open state in %s: read state identity: %w", s.dir, err)
	}
	if s.id != "" || s.opts.ReadOnly {
		return nil
	}
	var raw [idLen / 2]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("open state in %s: create state identity: %w", s.dir, err)
	}
	id := hex.EncodeToString(raw[:])
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keyID, []byte(id)) }); err != nil {
		return fmt.Errorf("open state in %s: write state identity: %w", s.dir, err)
	}
	s.id = id
	return nil
}

// idLen is the length of a state identity: 128 random bits in hex.
const idLen = 32

func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// ID is the state's identity: random, created with the state, kept by
// moves and copies of the directory. Idempotency keys are derived from it,
// so that two state directories with the same workflow, instance and
// activity names never send the same key. It is "" only for a state opened
// read-only that was written by a wf from before identities.
func (s *Store) ID() string { return s.id }

// Dir is the state directory.
func (s *Store) Dir() string { return s.dir }

// Close flushes and closes the database and releases the lock. It waits
// for reads and commits in flight; commits queued behind them fail with
// ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	dberr := s.db.Close()
	if dberr != nil {
		dberr = fmt.Errorf("close state database: %w", dberr)
	}
	return errors.Join(dberr, s.log.close(), s.lock.release())
}

// view runs fn in a read transaction, converting Badger panics (corrupt
// tables) into errors.
func (s *Store) view(fn func(txn *badger.Txn) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("state database panicked (corrupt files?): %v", r)
		}
	}()
	return s.db.View(fn)
}

// fileLogger sends Badger's warnings and errors to wf.log (and Logf), never
// to the terminal the TUI is drawing on.
type fileLogger struct {
	mu    sync.Mutex
	f     *os.File
	extra func(format string, args ...any)
}

func openLog(path string, extra func(string, ...any)) (*fileLogger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return &fileLogger{f: f, extra: extra}, nil
}

func (l *fileLogger) write(level, format string, args []any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		fmt.Fprintf(l.f, "%s %s badger: %s\n", time.Now().Format(time.RFC3339), level, msg)
	}
	if l.extra != nil {
		l.extra("badger %s: %s", level, msg)
	}
}

func (l *fileLogger) Errorf(format string, args ...any)   { l.write("ERROR", format, args) }
func (l *fileLogger) Warningf(format string, args ...any) { l.write("WARNING", format, args) }

// Infof and Debugf are dropped: Badger is chatty at those levels.
func (l *fileLogger) Infof(string, ...any)  {}
func (l *fileLogger) Debugf(string, ...any) {}

func (l *fileLogger) close() error {
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
