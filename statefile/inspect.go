package statefile

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4/table"

	"github.com/wf-engine/wf/statefile/record"
)

// inspect reads a state directory and checks everything about it without
// changing a byte: it is the first thing both a writer and a reader do,
// and any damage it finds is returned as a *DamageError (or an
// *UnsafeError) before anything could be repaired, deleted or rewritten.

type stateKind int

const (
	// kindEmpty: no database yet (a new state, or a directory that only
	// holds wf's own bookkeeping files).
	kindEmpty stateKind = iota
	// kindLegacy: a schema-1 state (Badger only, no log), written by a wf
	// from before the log; a writer migrates it.
	kindLegacy
	// kindLog: a schema-2 state: checkpoint, log, Badger.
	kindLog
)

type segFile struct {
	path   string
	header segHeader
	scan   segScan
}

type vlogFile struct {
	fid  uint32
	path string
	scan vlogScan
}

// stateInfo is everything inspect learned.
type stateInfo struct {
	dir  string
	kind stateKind
	cp   checkpoint
	// segs are the log segments from the one holding cp.flushed+1 on.
	segs []segFile
	// records are the log records after the checkpoint, in order.
	records []walRecord
	// last is the last sequence in the log (cp.flushed when nothing
	// follows it).
	last uint64
	// torn is a torn record at the end of the last segment (crash
	// residue), nil if none.
	torn *tornRecord
	// leftovers are files a writer deletes: segments wholly before the
	// checkpoint, half-created segments, and (for a state without a
	// checkpoint) empty segments of a creation that did not finish.
	leftovers []string

	dbExists bool
	manifest manifestInfo
	// tables are the .sst files the MANIFEST lists, unlisted those it
	// does not (crash residue of a flush or compaction).
	tables   []string
	unlisted []string
	memFiles []string
	vlogs    []vlogFile
	keyReg   bool // db/KEYREGISTRY exists
	meta     dbMeta
}

func (si *stateInfo) identity() string { return hex.EncodeToString(si.cp.identity[:]) }

// recordBytes is the size of the log records after the checkpoint, which
// a writer replays and a reader lays over the database.
func (si *stateInfo) recordBytes() int {
	n := 0
	for _, r := range si.records {
		n += len(r.payload)
	}
	return n
}

func inspect(dir string) (*stateInfo, error) {
	si := &stateInfo{dir: dir}
	for _, name := range []string{lockName, logName, logOldName, gitignoreName, checkpointName} {
		if _, err := lstatRegular(dir, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, socketName)); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return nil, notRegular(dir, filepath.Join(dir, socketName), fi)
	}
	cpExists, err := si.readCheckpoint()
	if err != nil {
		return nil, err
	}
	segs, err := si.listSegments()
	if err != nil {
		return nil, err
	}
	if cpExists {
		si.kind = kindLog
		if err := si.checkLog(segs); err != nil {
			return nil, err
		}
	} else {
		for _, s := range segs {
			sc, err := scanSegment(s.data, s.header, true)
			if err != nil || len(sc.records) > 0 || sc.torn != nil || s.header.first != 1 {
				return nil, damagef(dir, "%s is missing, but the log in wal/ has records", checkpointName)
			}
			// An empty first segment without a checkpoint: a creation
			// that stopped half-way.
			si.leftovers = append(si.leftovers, s.path)
		}
	}
	if err := si.checkDB(); err != nil {
		return nil, err
	}
	return si, si.crossCheck()
}

func (si *stateInfo) readCheckpoint() (bool, error) {
	path := filepath.Join(si.dir, checkpointName)
	f, err := openStateFile(si.dir, path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, cpFileSize+1))
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	cp, err := decodeCheckpointFile(b)
	if err != nil {
		return false, damagef(si.dir, "%s %v", checkpointName, err)
	}
	si.cp = cp
	return true, nil
}

type rawSegment struct {
	path   string
	name   string
	header segHeader
	data   []byte
}

// listSegments reads every log segment (whole: they are a few MiB and the
// scan needs every byte) and checks its header and name.
func (si *stateInfo) listSegments() ([]rawSegment, error) {
	walDir := filepath.Join(si.dir, walName)
	if _, err := os.Lstat(walDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if _, err := checkOwnDir(si.dir, walDir, false); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(walDir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", walDir, err)
	}
	var segs []rawSegment
	for _, e := range entries {
		path := filepath.Join(walDir, e.Name())
		if !e.Type().IsRegular() {
			fi, err := os.Lstat(path)
			if err != nil {
				return nil, err
			}
			return nil, notRegular(si.dir, path, fi)
		}
		if strings.HasSuffix(e.Name(), ".tmp") {
			si.leftovers = append(si.leftovers, path)
			continue
		}
		first, ok := parseSegmentName(e.Name())
		if !ok {
			continue // not ours: left alone
		}
		data, err := readStateFile(si.dir, path)
		if err != nil {
			return nil, err
		}
		rel := relName(si.dir, path)
		h, err := decodeSegHeader(data)
		if err != nil {
			return nil, damagef(si.dir, "%s: %v", rel, err)
		}
		if h.first != first {
			return nil, damagef(si.dir, "%s: its header says it starts at sequence %d", rel, h.first)
		}
		segs = append(segs, rawSegment{path: path, name: e.Name(), header: h, data: data})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].header.first < segs[j].header.first })
	return segs, nil
}

func segmentName(first uint64) string { return fmt.Sprintf("%016x.wal", first) }

func parseSegmentName(name string) (uint64, bool) {
	hexPart, ok := strings.CutSuffix(name, ".wal")
	if !ok || len(hexPart) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hexPart, 16, 64)
	return n, err == nil && n > 0
}

func readStateFile(stateDir, path string) ([]byte, error) {
	f, err := openStateFile(stateDir, path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readWhole(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// checkLog checks the segments against the checkpoint: the same state,
// every sequence from the checkpoint on present exactly once and in
// order, checksums, and a torn record only at the very end.
func (si *stateInfo) checkLog(segs []rawSegment) error {
	cp := si.cp
	for _, s := range segs {
		if s.header.identity != cp.identity {
			return damagef(si.dir, "wal/%s belongs to another state (identity %x, this state is %x)", s.name, s.header.identity, cp.identity)
		}
	}
	start := -1
	for i, s := range segs {
		if s.header.first <= cp.flushed+1 {
			start = i
		}
	}
	if start < 0 {
		return damagef(si.dir, "the log segment holding sequence %d (the first after the checkpoint) is missing from wal/", cp.flushed+1)
	}
	for _, s := range segs[:start] {
		si.leftovers = append(si.leftovers, s.path)
	}
	segs = segs[start:]
	if newest := segs[len(segs)-1].header.first; newest < cp.active {
		return damagef(si.dir, "log segment wal/%s is missing (the checkpoint names it)", segmentName(cp.active))
	}
	found := false
	next := segs[0].header.first
	for i, s := range segs {
		if s.header.first == cp.active {
			found = true
		}
		if s.header.first != next {
			return damagef(si.dir, "log records %d to %d are missing (wal/%s starts at %d)", next, s.header.first-1, s.name, s.header.first)
		}
		last := i == len(segs)-1
		sc, err := scanSegment(s.data, s.header, last)
		if err != nil {
			return damagef(si.dir, "wal/%s %v", s.name, err)
		}
		for _, r := range sc.records {
			if r.seq > cp.flushed {
				si.records = append(si.records, r)
			}
		}
		next = s.header.first + uint64(len(sc.records))
		if last {
			si.torn = sc.torn
		}
		si.segs = append(si.segs, segFile{path: s.path, header: s.header, scan: sc})
	}
	if !found {
		return damagef(si.dir, "log segment wal/%s is missing (the checkpoint names it)", segmentName(cp.active))
	}
	si.last = next - 1
	if si.last < cp.flushed {
		return damagef(si.dir, "the log ends at sequence %d, before the checkpoint's %d (records were cut off)", si.last, cp.flushed)
	}
	return nil
}

// checkDB checks db/: only regular files, a MANIFEST consistent with the
// checkpoint, every listed table present and intact, value-log files
// intact up to what the checkpoint made durable.
func (si *stateInfo) checkDB() error {
	dbDir := filepath.Join(si.dir, dbName)
	if _, err := os.Lstat(dbDir); errors.Is(err, fs.ErrNotExist) {
		if si.kind == kindLog {
			return damagef(si.dir, "the database directory db/ is missing")
		}
		return nil
	}
	if _, err := checkOwnDir(si.dir, dbDir, false); err != nil {
		return err
	}
	entries, err := os.ReadDir(dbDir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dbDir, err)
	}
	var ssts, others []string
	var discard fs.FileInfo
	for _, e := range entries {
		path := filepath.Join(dbDir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return notRegular(si.dir, path, fi)
		}
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".sst"):
			ssts = append(ssts, name)
		case strings.HasSuffix(name, ".mem"):
			si.memFiles = append(si.memFiles, path)
		case strings.HasSuffix(name, ".vlog"):
			fid, err := strconv.ParseUint(strings.TrimSuffix(name, ".vlog"), 10, 32)
			if err != nil {
				return damagef(si.dir, "db/%s is not a Badger value log name", name)
			}
			si.vlogs = append(si.vlogs, vlogFile{fid: uint32(fid), path: path})
		case name == "KEYREGISTRY":
			si.keyReg = true
		case name == "DISCARD":
			discard = fi
		case name == "MANIFEST", name == "LOCK", name == "MANIFEST-REWRITE":
		default:
			others = append(others, name)
		}
	}
	mi, err := readManifest(si.dir, filepath.Join(dbDir, "MANIFEST"), false)
	if err != nil {
		return err
	}
	si.manifest = mi
	if !mi.present {
		switch {
		case si.kind == kindLog:
			return damagef(si.dir, "db/MANIFEST is missing")
		case len(ssts)+len(si.memFiles)+len(si.vlogs)+len(others) > 0:
			return damagef(si.dir, "db/ has files but no Badger MANIFEST: not a wf state directory")
		}
		return nil // an empty db/: nothing was ever written
	}
	si.dbExists = true
	if si.kind == kindEmpty {
		si.kind = kindLegacy
	}
	// Tables the MANIFEST does not list are crash residue only if the
	// MANIFEST is the one the checkpoint saw, grown by whole entries.
	residueOK := false
	switch {
	case si.kind == kindLog && mi.ino == si.cp.manifestIno:
		if mi.valid < int64(si.cp.manifestLen) {
			return damagef(si.dir, "db/MANIFEST is shorter than the checkpoint says (%d bytes of entries, want at least %d): truncated, or an older copy of the database", mi.valid, si.cp.manifestLen)
		}
		if mi.crc, err = manifestPrefixCRC(si.dir, dbDir, int64(si.cp.manifestLen)); err != nil {
			return err
		}
		if mi.crc != si.cp.manifestCRC {
			return damagef(si.dir, "db/MANIFEST does not begin with what the checkpoint saw (changed or replaced)")
		}
		residueOK = true
	case mi.valid != mi.size:
		return damagef(si.dir, "db/MANIFEST ends with %d bytes that are not a whole entry", mi.size-mi.valid)
	case si.kind == kindLegacy:
		residueOK = true // a legacy state has no fingerprint to go by
	}
	listed := map[string]bool{}
	for id := range mi.tables {
		name := table.IDToFilename(id)
		listed[name] = true
		fi, err := lstatRegular(si.dir, filepath.Join(dbDir, name))
		if err != nil {
			return err
		}
		if fi == nil {
			return damagef(si.dir, "db/%s is missing (the MANIFEST lists it)", name)
		}
		si.tables = append(si.tables, filepath.Join(dbDir, name))
	}
	sort.Strings(si.tables)
	for _, name := range ssts {
		if !listed[name] {
			if !residueOK {
				return damagef(si.dir, "db/%s is not in db/MANIFEST (the MANIFEST was rewritten or replaced)", name)
			}
			si.unlisted = append(si.unlisted, filepath.Join(dbDir, name))
		}
	}
	if si.meta, err = verifyTables(si.dir, dbDir, mi.tables); err != nil {
		return err
	}
	if err := checkKeyRegistry(si.dir, filepath.Join(dbDir, "KEYREGISTRY")); err != nil {
		return err
	}
	if err := checkDiscard(si.dir, discard); err != nil {
		return err
	}
	return si.checkVlogs()
}

func manifestPrefixCRC(stateDir, dbDir string, n int64) (uint32, error) {
	f, err := openStateFile(stateDir, filepath.Join(dbDir, "MANIFEST"), os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return crcPrefix(f, n)
}

func (si *stateInfo) checkVlogs() error {
	sort.Slice(si.vlogs, func(i, j int) bool { return si.vlogs[i].fid < si.vlogs[j].fid })
	cpFound := false
	for i := range si.vlogs {
		v := &si.vlogs[i]
		name := filepath.Base(v.path)
		f, err := openStateFile(si.dir, v.path, os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		v.scan, err = scanVlog(f)
		f.Close()
		if err != nil {
			return damagef(si.dir, "db/%s %v", name, err)
		}
		newest := i == len(si.vlogs)-1
		durable := int64(vlogHeaderSize)
		if si.kind == kindLog && v.fid == si.cp.vlogFid {
			durable, cpFound = int64(si.cp.vlogEnd), true
		}
		if v.scan.validEnd < durable {
			return damagef(si.dir, "db/%s: the values before offset %d are damaged or cut off (valid entries end at %d)", name, durable, v.scan.validEnd)
		}
		if !v.scan.cleanTail && !newest {
			return damagef(si.dir, "db/%s has damaged bytes after offset %d", name, v.scan.validEnd)
		}
		if si.kind == kindLog && v.fid < si.cp.vlogFid && v.scan.validEnd != v.scan.size {
			return damagef(si.dir, "db/%s ends at %d, but its entries end at %d", name, v.scan.size, v.scan.validEnd)
		}
	}
	if si.kind == kindLog && !cpFound && si.cp.vlogEnd > vlogHeaderSize {
		return damagef(si.dir, "db/%06d.vlog is missing (it holds values the checkpoint made durable)", si.cp.vlogFid)
	}
	return nil
}

// crossCheck compares what the tables say with the checkpoint and log.
func (si *stateInfo) crossCheck() error {
	m := si.meta
	if m.schema != "" {
		v, err := strconv.Atoi(m.schema)
		if err != nil {
			return damagef(si.dir, "schema version %q is not a number: not a wf state directory", m.schema)
		}
		if v > record.SchemaVersion {
			return fmt.Errorf("state in %s uses schema %d; this wf supports %d: upgrade wf", si.dir, v, record.SchemaVersion)
		}
		if v < 1 {
			return fmt.Errorf("state in %s uses schema %d; this wf supports %d: the state is too old for this wf (remove it or use an older wf)", si.dir, v, record.SchemaVersion)
		}
		if v >= stateSchemaWith && si.kind != kindLog {
			return damagef(si.dir, "%s is missing (the database was written with a log)", checkpointName)
		}
	}
	if si.kind != kindLog {
		return nil
	}
	if m.id != "" && m.id != si.identity() {
		return damagef(si.dir, "db/ belongs to another state (identity %s, the checkpoint says %s)", m.id, si.identity())
	}
	if m.id == "" && si.cp.flushed > 0 {
		return damagef(si.dir, "the database has no state identity, though the checkpoint says it holds sequence %d", si.cp.flushed)
	}
	if m.seq < si.cp.flushed {
		return damagef(si.dir, "the database holds the log up to sequence %d, older than the checkpoint's %d (db/ replaced by an older copy?)", m.seq, si.cp.flushed)
	}
	if m.seq > si.last {
		return damagef(si.dir, "the database holds the log up to sequence %d, but the log ends at %d (log records are missing)", m.seq, si.last)
	}
	return nil
}
