// Package statefile is wf's durable state. A state directory (default
// <config dir>/.wf) holds a write-ahead log of wf's own (wal/), a
// checkpoint file, and an embedded Badger database (db/) that is the
// materialised view of the log, guarded by a lock file that names the
// holder. docs/architecture.md and docs/durability.md describe the layout
// and its guarantees.
//
// Writes go through Commit: concurrent callers are merged into one log
// record (group commit), appended with one write and one fdatasync (the
// durability point), then applied to Badger without a sync. Opening
// checks every file before anything is written, so damaged state is an
// error, never silently repaired or lost; read-only opens change nothing
// at all.
package statefile

import (
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Names inside a state directory.
const (
	gitignoreName = ".gitignore"
	lockName      = "wf.lock"
	dbName        = "db"
	walName       = "wal"
	logName       = "wf.log"
	logOldName    = "wf.log.1"
	// socketName is the executor's event socket (cmd/wf names it too);
	// the store only refuses a link planted under that name.
	socketName = "events.sock"
)

// Options tunes Open. The zero value is ready to use.
type Options struct {
	// ReadOnly opens the state for reading only: nothing in the state
	// directory is created, changed or deleted, the lock is taken shared
	// (readers never block each other), and Commit fails. A state that
	// does not exist reads as empty.
	ReadOnly bool
	// Command is recorded in the lock file so that a second wf can say who
	// holds the state (e.g. "wf apply").
	Command string
	// LockTimeout is how long Open waits for the lock; 0 fails at once.
	LockTimeout time.Duration
	// Logf, when set, also receives Badger's warnings and errors.
	Logf func(format string, args ...any)

	// For tests: the size of new log segments (0: defaultSegmentSize),
	// and a hook called after each record is in the log and before it is
	// applied to Badger.
	segmentSize   int64
	afterLogWrite func(seq uint64)
}

func (o Options) segSize() int64 {
	if o.segmentSize > 0 {
		return o.segmentSize
	}
	return defaultSegmentSize
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
	// reads is what reads of many activities hand on to the next ones
	// (read.go).
	reads readPools
	db    *badger.DB // nil: a reader of a state with no database yet
	// ov holds, for a reader, the log records after the checkpoint.
	ov *overlay
	// viewDir is a reader's private directory for Badger (removed at
	// Close).
	viewDir string
	// info is what a reader's checks found (for Check).
	info *stateInfo
	lock *lockFile
	log  *fileLogger
	// id is the state's random identity (see ID).
	id string

	// closeMu is held shared by every read and write and exclusively by
	// Close, so Close waits for work in flight and nothing touches a closed
	// database.
	closeMu sync.RWMutex
	closed  bool

	// Group commit: see Commit. reqs holds spare requests (commitOps).
	mu      sync.Mutex
	pending []*commitReq
	reqs    sync.Pool
	writing bool
	// lingerDone, when set, is closed once lingerTarget callers queue.
	lingerDone   chan struct{}
	lingerTarget int
	// lastBatch is the number of Commit calls in the previous batch, and
	// lastQueued the number that queued while it was written.
	lastBatch, lastQueued int
	// Counters for tests and benchmarks: batches written and the Commit
	// calls they carried.
	batches, batchedReqs atomic.Int64

	// The writer's log state, touched only by the group-commit leader
	// (and by Open and Close).
	w        *writerState
	identity [16]byte
}

// writerState is the part of a writable Store that the group-commit
// leader (and Open and Close) touches, with what it shares with the
// applier.
type writerState struct {
	wal *walWriter
	cp  checkpoint
	// lastSeq is the last sequence in the log; metaSeq the last synced one
	// applied to Badger (its meta key): the checkpoint never goes past it.
	lastSeq, metaSeq uint64
	// cand is a checkpoint candidate: once no memtable log with an id up
	// to cand.memFid is left, every record up to cand.seq is in tables.
	cand struct {
		seq    uint64
		memFid int
		ok     bool
	}
	// mu guards what the leader and the applier share: failed (sticky:
	// after a write that may have half-happened, or a full disk, the store
	// refuses every further write), the applier's progress and metaSeq.
	mu               sync.Mutex
	applyCond        *sync.Cond
	failed, applyErr error
	queued, applied  uint64
	jobs             chan applyJob
	// kick wakes the applier (awaitKick): records up to kicked may be
	// applied now, every record once stopping.
	kick        chan struct{}
	kicked      uint64
	stopping    bool
	applierDone chan struct{}
	lsmBytes    atomic.Int64 // tables' size, for the space margin
	unlisted    int          // bytes applied since db/ was last looked at (applier)
	allocated   map[string]bool
	// Time spent appending (and syncing) log records and applying them to
	// Badger, for benchmarks.
	logTime, applyTime time.Duration
}

// Open opens the state directory dir. A writer creates it if needed (mode
// 0700), takes its lock exclusively, checks every file, and recovers from
// the log. A directory locked by another wf yields a *LockedError; damage
// a *DamageError; a directory anyone else could tamper with an
// *UnsafeError; a full disk an error wrapping syscall.ENOSPC.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open state: empty directory name")
	}
	if opts.ReadOnly {
		return openReader(dir, opts)
	}
	return openWriter(dir, opts)
}

func badgerOptions(dbDir string, logger badger.Logger) badger.Options {
	return badger.DefaultOptions(dbDir).
		// The log is the durability point; Badger is its view.
		WithSyncWrites(false).
		WithLogger(logger).
		WithLoggingLevel(badger.WARNING).
		WithMetricsEnabled(false).
		// wf's flock is the lock; Badger's LOCK file would be one more
		// file to create and delete.
		WithBypassLockGuard(true).
		WithMemTableSize(memTableSize).
		WithNumMemtables(2).
		WithValueLogFileSize(16 << 20).
		// Records are small JSON documents: keep them in the LSM so a read
		// never touches the value log; only big outputs go there.
		WithValueThreshold(64 << 10).
		WithVerifyValueChecksum(true).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(0).
		WithNumVersionsToKeep(1).
		WithNumCompactors(2).
		// Every L0 table overlaps most of L1 (attempt keys of all
		// activities arrive interleaved), so an L0 compaction rewrites
		// L1: with five L0 tables to one compaction instead of three, L1
		// is rewritten 0.2 times per flushed memtable instead of 0.33. The
		// stall stays as far above it as before.
		WithNumLevelZeroTables(5).
		WithNumLevelZeroTablesStall(10).
		WithCompression(options.None).
		// Commit serialises writers itself; conflict tracking would only
		// cost memory.
		WithDetectConflicts(false)
}

// openBadger converts Badger's panics on corrupt files into errors.
func openBadger(dir string, opt badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("badger panicked: %v", r)
		}
		if err != nil {
			err = fmt.Errorf("open state in %s: the database is unreadable: %w", dir, err)
		}
	}()
	return badger.Open(opt)
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
// read-only that was written by a wf from before identities, or that does
// not exist yet.
func (s *Store) ID() string { return s.id }

// Dir is the state directory.
func (s *Store) Dir() string { return s.dir }

// Close makes the state durable and releases it: a writer lets Badger
// flush its memtables, writes a checkpoint and deletes the log segments the
// tables now hold, so a clean close leaves a nearly empty log. It waits
// for reads and commits in flight; commits queued behind them fail with
// ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.w == nil {
		return s.closeReader()
	}
	return s.closeWriter()
}

func (s *Store) closeWriter() error {
	w := s.w
	dbDir := filepath.Join(s.dir, dbName)
	s.stopApplier()
	failed := w.failure()
	if failed != nil {
		if free, err := freeBytes(dbDir); err == nil && free < spaceMargin(w.lsmBytes.Load(), 0) {
			// Badger's close flushes its memtables into new tables, which
			// on a full disk could fault. Everything committed is in the
			// log, so leave Badger as it is; the lock stays held until
			// this process exits, so no other wf opens the state while
			// this one's database is still open.
			err := fmt.Errorf("state in %s was not closed cleanly (%w); the next wf apply recovers it from the log", s.dir, failed)
			s.Logf(LogError, "%v", err)
			return err
		}
	}
	var errs []error
	if err := s.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close state database: %w", err))
	} else if failed == nil {
		if err := s.checkpoint(true); err != nil {
			errs = append(errs, err)
		}
	}
	if err := tightenDir(dbDir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		s.Logf(LogError, "state closed with an error: %v", err)
	} else {
		s.Logf(LogInfo, "state closed cleanly (checkpoint written), lock released")
	}
	errs = append(errs, w.wal.close(), s.log.close(), s.lock.release())
	return errors.Join(errs...)
}

// abandon closes what a failed Open had opened.
func (s *Store) abandon() {
	s.stopApplier()
	if s.db != nil {
		_ = s.db.Close()
	}
	if s.w != nil && s.w.wal != nil {
		_ = s.w.wal.close()
	}
	_ = s.log.close()
}

// snapshot starts a read.
func (s *Store) snapshot() *snapshot {
	snap := &snapshot{ov: s.ov}
	if s.db != nil {
		snap.txn = s.db.NewTransaction(false)
	}
	return snap
}
