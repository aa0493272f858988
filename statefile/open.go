package statefile

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

// Opening a state for writing: check everything (inspect), then create,
// migrate or recover it.

func openWriter(dir string, opts Options) (_ *Store, err error) {
	if err := makeStateDir(dir); err != nil {
		return nil, fmt.Errorf("open state: %w", err)
	}
	if _, err := checkOwnDir(dir, dir, true); err != nil {
		return nil, err
	}
	lock, err := acquireLock(dir, true, opts.LockTimeout)
	if err != nil {
		return nil, wrapOpen(dir, err)
	}
	defer func() {
		if err != nil {
			_ = lock.release()
		}
	}()
	si, err := inspect(dir)
	if err != nil {
		return nil, wrapOpen(dir, err)
	}
	dbDir := filepath.Join(dir, dbName)
	spaceDir := dir
	if si.dbExists {
		spaceDir = dbDir
	}
	if err := checkSpace(dir, spaceDir, si.tableBytes(), 2*si.recordBytes()); err != nil {
		return nil, err
	}

	// The state is sound: from here on wf may write.
	if err := lock.writeInfo(opts.Command); err != nil {
		return nil, wrapOpen(dir, err)
	}
	if err := chmodIfNeeded(dir, 0o700); err != nil {
		return nil, wrapOpen(dir, err)
	}
	if err := writeGitignore(dir); err != nil {
		return nil, wrapOpen(dir, err)
	}
	logger, err := openLog(dir, filepath.Join(dir, logName), opts.Logf)
	if err != nil {
		return nil, wrapOpen(dir, err)
	}
	s := &Store{dir: dir, opts: opts, lock: lock, log: logger, w: newWriterState()}
	defer func() {
		if err != nil {
			s.abandon()
		}
	}()
	if si.kind == kindLog {
		err = s.recover(si)
	} else {
		err = s.create(si)
	}
	if err != nil {
		return nil, err
	}
	s.startApplier()
	if err := s.finishSchema(); err != nil {
		return nil, err
	}
	s.logOpened(si)
	return s, nil
}

// logOpened says in wf.log who took the state and what opening it took:
// the records replayed from the log, a torn record cleared, crash residue
// removed, a migration.
func (s *Store) logOpened(si *stateInfo) {
	var did []string
	switch si.kind {
	case kindLog:
		did = append(did, fmt.Sprintf("%d log %s replayed after the checkpoint", len(si.records), plural(len(si.records), "record", "records")))
		if t := si.torn; t != nil && t.after > 0 {
			did = append(did, fmt.Sprintf("the end of the log a power loss cut short cleared from record %d on (%d %s after it; none was acknowledged as synced)", t.seq, t.after, plural(t.after, "record", "records")))
		} else if t != nil {
			did = append(did, "a record a crash cut short at the end of the log cleared (it was never acknowledged)")
		}
		if n := len(si.memFiles) + len(si.leftovers); n > 0 {
			did = append(did, fmt.Sprintf("%d %s left by a crash removed", n, plural(n, "file", "files")))
		}
	case kindLegacy:
		did = append(did, "migrated from schema 1 (database only)")
	default:
		did = append(did, "created")
	}
	cmd := s.opts.Command
	if cmd == "" {
		cmd = "a writer"
	}
	s.Logf(LogInfo, "state opened by %s (pid %d), lock held exclusively: %s", cmd, os.Getpid(), strings.Join(did, "; "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func wrapOpen(dir string, err error) error {
	var le *LockedError
	var de *DamageError
	var ue *UnsafeError
	if errors.As(err, &le) || errors.As(err, &de) || errors.As(err, &ue) || strings.Contains(err.Error(), dir) {
		return err
	}
	return fmt.Errorf("open state in %s: %w", dir, err)
}

// makeStateDir creates the state directory (0700; missing parents 0755)
// or checks that an existing one is a directory.
func makeStateDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create state directory: %w", err)
		}
		return nil
	default:
		return err
	}
}

func writeGitignore(dir string) error {
	gi := filepath.Join(dir, gitignoreName)
	f, err := openNoFollow(gi, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return chmodIfNeeded(gi, 0o600)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// "*" keeps the whole state directory, this file included, out of git
	// even when the user runs `git add -A`.
	if _, err := f.WriteString("*\n"); err != nil {
		return fmt.Errorf("write %s: %w", gi, err)
	}
	return nil
}

func (si *stateInfo) tableBytes() int64 {
	var n int64
	for _, p := range si.tables {
		if fi, err := os.Lstat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// create starts the log of a new state, or of one written by a wf from
// before the log (schema 1, Badger only): its memtables are flushed into
// tables first, so that the checkpoint's "everything up to 0 is in
// tables" holds.
func (s *Store) create(si *stateInfo) error {
	dbDir := filepath.Join(s.dir, dbName)
	var legacyID string
	if si.kind == kindLegacy {
		db, err := openBadger(s.dir, badgerOptions(dbDir, s.log))
		if err != nil {
			return err
		}
		legacyID, err = legacyIdentity(s.dir, db)
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("open state in %s: flush the database: %w", s.dir, cerr)
		}
		if err != nil {
			return err
		}
	}
	for _, p := range si.leftovers {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return wrapOpen(s.dir, err)
		}
	}
	if legacyID != "" {
		if _, err := hex.Decode(s.identity[:], []byte(legacyID)); err != nil {
			return damagef(s.dir, "state identity %q is not %d hex digits", legacyID, idLen)
		}
	} else if _, err := rand.Read(s.identity[:]); err != nil {
		return fmt.Errorf("open state in %s: create state identity: %w", s.dir, err)
	}
	s.id = hex.EncodeToString(s.identity[:])
	walDir := filepath.Join(s.dir, walName)
	if err := os.Mkdir(walDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return wrapOpen(s.dir, err)
	}
	w := s.w
	w.wal = &walWriter{stateDir: s.dir, dir: walDir, identity: s.identity, segSize: s.opts.segSize()}
	if err := w.wal.create(1, 0); err != nil {
		return s.writeFailed(err)
	}
	if err := s.openDB(); err != nil {
		return err
	}
	w.cp = checkpoint{identity: s.identity, schema: stateSchemaWith}
	return s.checkpoint(false)
}

// legacyIdentity reads the identity and checks the schema of a schema-1
// database.
func legacyIdentity(dir string, db *badger.DB) (string, error) {
	var id, schema []byte
	empty := true
	err := db.View(func(txn *badger.Txn) error {
		for _, kv := range []struct {
			key []byte
			out *[]byte
		}{{keyID, &id}, {keySchema, &schema}} {
			item, err := txn.Get(kv.key)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if *kv.out, err = item.ValueCopy(nil); err != nil {
				return err
			}
		}
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		it.Rewind()
		empty = !it.Valid()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("open state in %s: read the database: %w", dir, err)
	}
	switch {
	case schema == nil && !empty:
		return "", damagef(dir, "the database has data but no wf schema version: not a wf state directory")
	case schema != nil && string(schema) != "1":
		return "", damagef(dir, "schema version %q without a checkpoint: not a wf state directory", schema)
	case id != nil && !validID(string(id)):
		return "", damagef(dir, "state identity %q is not %d hex digits", id, idLen)
	}
	return string(id), nil
}

// recover opens a schema-2 state that inspect found sound: the memtable
// logs go (the log holds everything they held), Badger opens, the log
// after the checkpoint is applied again, and a torn record at its end is
// cleared.
func (s *Store) recover(si *stateInfo) error {
	w := s.w
	s.identity = si.cp.identity
	s.id = si.identity()
	w.cp = si.cp
	w.lastSeq, w.metaSeq = si.last, si.last
	for _, p := range append(si.memFiles, si.leftovers...) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return wrapOpen(s.dir, err)
		}
	}
	last := si.segs[len(si.segs)-1]
	segs := make([]uint64, len(si.segs))
	for i, sf := range si.segs {
		segs[i] = sf.header.first
	}
	w.wal = &walWriter{stateDir: s.dir, dir: filepath.Join(s.dir, walName), identity: s.identity, segSize: s.opts.segSize()}
	off := last.scan.end
	if err := w.wal.resume(last.path, last.header, off, segs); err != nil {
		return wrapOpen(s.dir, err)
	}
	if t := si.torn; t != nil {
		if err := w.wal.clearTail(t); err != nil {
			return s.writeFailed(err)
		}
	} else if err := w.wal.sync(); err != nil {
		// Records a killed wf wrote but did not sync are applied below;
		// make them durable first.
		return s.writeFailed(err)
	}
	if err := s.openDB(); err != nil {
		return err
	}
	return s.replay(si.records)
}

// replay applies log records to Badger in order, many per transaction.
func (s *Store) replay(recs []walRecord) error {
	const batchBytes = 1 << 20
	var groups [][]op
	size := 0
	flush := func(seq uint64) error {
		if len(groups) == 0 {
			return nil
		}
		groups = append(groups, []op{seqOp(seq)})
		if err := s.write(groups); err != nil {
			return fmt.Errorf("open state in %s: replay the log: %w", s.dir, err)
		}
		groups, size = groups[:0], 0
		return nil
	}
	for i, r := range recs {
		ops, err := decodeOps(r.payload)
		if err != nil {
			// inspect decoded every record already.
			return damagef(s.dir, "log record %d: %v", r.seq, err)
		}
		groups = append(groups, ops)
		size += len(r.payload)
		if size >= batchBytes || i == len(recs)-1 {
			if err := flush(r.seq); err != nil {
				return err
			}
		}
	}
	return nil
}

func seqOp(seq uint64) op {
	return op{kind: opSet, key: keySeq, val: binary.BigEndian.AppendUint64(nil, seq)}
}

// openDB opens Badger on db/ for writing (after the checks), makes its
// files 0600 and allocates its memtable logs.
func (s *Store) openDB() error {
	dbDir := filepath.Join(s.dir, dbName)
	db, err := openBadger(s.dir, badgerOptions(dbDir, s.log))
	if err != nil {
		return err
	}
	s.db = db
	if err := tightenDir(dbDir); err != nil {
		return wrapOpen(s.dir, err)
	}
	return s.refreshDB()
}

// finishSchema writes the schema version and identity into a database
// that lacks them (a new or migrated state), through the log like any
// commit.
func (s *Store) finishSchema() error {
	var ops []op
	snap := s.snapshot()
	defer snap.discard()
	schema, _, err := snap.get(keySchema)
	if err != nil {
		return fmt.Errorf("open state in %s: read schema version: %w", s.dir, err)
	}
	if string(schema) != fmt.Sprint(record.SchemaVersion) {
		ops = append(ops, op{kind: opSet, key: keySchema, val: []byte(fmt.Sprint(record.SchemaVersion))})
	}
	id, ok, err := snap.get(keyID)
	if err != nil {
		return fmt.Errorf("open state in %s: read state identity: %w", s.dir, err)
	}
	if ok && string(id) != s.id {
		return damagef(s.dir, "the database's identity %s is not the checkpoint's %s", id, s.id)
	}
	if !ok {
		ops = append(ops, op{kind: opSet, key: keyID, val: []byte(s.id)})
	}
	if len(ops) == 0 {
		return nil
	}
	return s.commitOps(ops, true)
}
