package statefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
)

// Checks of Badger's own files, done on file descriptors of our own before
// Badger opens anything: Badger deletes tables its MANIFEST does not list
// (even read-only), skips tables whose checksum fails, truncates torn
// MANIFEST and value-log tails, and panics in goroutines of its own on
// some corrupt tables. None of that may happen to damaged state silently.

// manifestInfo is what db/MANIFEST says.
type manifestInfo struct {
	ino     uint64
	size    int64
	valid   int64 // length of its prefix of complete entries
	crc     uint32
	tables  map[uint64]badger.TableManifest
	present bool
}

// readManifest replays db/MANIFEST from a descriptor of our own and
// fingerprints it. Reading first and fsyncing afterwards makes the prefix
// read durable, even if Badger appended to it a moment ago.
func readManifest(stateDir, path string, sync bool) (manifestInfo, error) {
	var mi manifestInfo
	f, err := openStateFile(stateDir, path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return mi, nil
	}
	if err != nil {
		return mi, err
	}
	defer f.Close()
	mi.present = true
	fi, err := f.Stat()
	if err != nil {
		return mi, err
	}
	mi.size = fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		mi.ino = st.Ino
	}
	m, valid, err := replayManifest(f)
	if err != nil {
		return mi, damagef(stateDir, "db/MANIFEST is unreadable: %s", firstLine(err.Error()))
	}
	mi.valid, mi.tables = valid, m.Tables
	if mi.crc, err = crcPrefix(f, valid); err != nil {
		return mi, fmt.Errorf("read db/MANIFEST: %w", err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return mi, fmt.Errorf("sync db/MANIFEST: %w", err)
		}
	}
	return mi, nil
}

func replayManifest(f *os.File) (m badger.Manifest, valid int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return m, 0, err
	}
	opt := badger.DefaultOptions("").WithLogger(nil)
	return badger.ReplayManifestFile(f, 0, opt)
}

func crcPrefix(f *os.File, n int64) (uint32, error) {
	h := crc32cNew()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// dbMeta is what the tables say about wf's meta keys: the newest
// version of each across every table.
type dbMeta struct {
	seq    uint64 // last applied (synced) log sequence; 0 when absent
	id     string
	schema string
}

type metaValue struct {
	version uint64
	value   []byte
	deleted bool
	found   bool
}

// verifyTables opens every listed table the way Badger will, but in
// goroutines of our own that recover a corrupt table's panic, verifies
// every block's checksum, and reads wf's meta keys from each.
func verifyTables(stateDir, dbDir string, tables map[uint64]badger.TableManifest) (dbMeta, error) {
	ids := make([]uint64, 0, len(tables))
	for id := range tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	type result struct {
		meta [3]metaValue
		err  error
	}
	results := make([]result, len(ids))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(ids), 1)) {
		wg.Go(func() {
			// One buffer per worker, for table after table: a state's
			// tables are tens of MB, which would otherwise be allocated,
			// zeroed and collected at every open.
			var buf []byte
			for i := range work {
				path := table.NewFilename(ids[i], dbDir)
				results[i].meta, buf, results[i].err = verifyTable(path, tables[ids[i]], buf)
			}
		})
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
	var best [3]metaValue
	for i, r := range results {
		if r.err != nil {
			return dbMeta{}, damagef(stateDir, "db/%s is damaged: %s", table.IDToFilename(ids[i]), r.err)
		}
		for k, v := range r.meta {
			if v.found && (!best[k].found || v.version > best[k].version) {
				best[k] = v
			}
		}
	}
	var tm dbMeta
	if v := best[0]; v.found && !v.deleted {
		if len(v.value) != 8 {
			return tm, damagef(stateDir, "the database's log sequence is %d bytes, want 8", len(v.value))
		}
		tm.seq = binary.BigEndian.Uint64(v.value)
	}
	if v := best[1]; v.found && !v.deleted {
		tm.id = string(v.value)
	}
	if v := best[2]; v.found && !v.deleted {
		tm.schema = string(v.value)
	}
	return tm, nil
}

// buf is a buffer to read the table into; verifyTable returns it, grown,
// for the next table (the table is not used once verifyTable returns).
func verifyTable(path string, tm badger.TableManifest, buf []byte) (meta [3]metaValue, _ []byte, err error) {
	// The table is read into memory rather than mmapped: a damaged table
	// then fails bounds checks (a recoverable panic) instead of faulting
	// on a page past its end, and nothing can unmap it under us.
	f, err := openNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return meta, buf, err
	}
	defer f.Close()
	data, err := readInto(f, buf, true)
	if err != nil {
		return meta, buf, err
	}
	buf = data
	if len(data) == 0 {
		return meta, buf, errors.New("empty file")
	}
	id, ok := table.ParseFileID(path)
	if !ok {
		return meta, buf, errors.New("not a table file name")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt table (%s)", firstLine(fmt.Sprint(r)))
		}
	}()
	opt := badgerOptions("", nil)
	topt := &table.Options{
		Compression:        tm.Compression,
		BlockSize:          opt.BlockSize,
		BloomFalsePositive: opt.BloomFalsePositive,
		// Every block, now: Badger itself checks only the blocks it reads.
		ChkMode: options.OnTableRead,
	}
	t, err := table.OpenInMemoryTable(data, id, topt)
	if err != nil {
		return meta, buf, errors.New(firstLine(err.Error()))
	}
	t.MmapFile.Fd = f // for Badger's error messages; never closed through t
	if err := t.VerifyChecksum(); err != nil {
		return meta, buf, errors.New(firstLine(err.Error()))
	}
	it := t.NewIterator(0)
	defer it.Close()
	for i, k := range [][]byte{keySeq, keyID, keySchema} {
		seek := y.KeyWithTs(k, math.MaxUint64)
		it.Seek(seek)
		if !it.Valid() || !y.SameKey(it.Key(), seek) {
			continue
		}
		vs := it.ValueCopy()
		meta[i] = metaValue{version: y.ParseTs(it.Key()), value: bytes.Clone(vs.Value), deleted: vs.Meta&bitDelete != 0, found: true}
		if vs.Meta&bitValuePointer != 0 {
			return meta, buf, fmt.Errorf("meta key %q is stored in the value log", k)
		}
	}
	return meta, buf, nil
}

// readWhole reads a file into a buffer of its size (io.ReadAll would grow
// and clear a buffer several times over: a third of the checks' CPU on a
// state with tens of megabytes of tables). A file that grew meanwhile is
// read to its end all the same.
func readWhole(f *os.File) ([]byte, error) { return readInto(f, nil, false) }

// readInto is readWhole into buf when the file fits in it (it returns a
// new buffer otherwise). A buffer made for reuse gets an eighth more room,
// so that the next file of about the same size fits; a one-off read (a
// log segment at open) gets exactly its size.
func readInto(f *os.File, buf []byte, reuse bool) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if int64(cap(buf)) < size {
		room := size
		if reuse {
			room += size / 8
		}
		buf = make([]byte, room)
	}
	data := buf[:size]
	n, err := io.ReadFull(f, data)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return data[:n], nil // shrank meanwhile: what is there is checked
	case err != nil && !errors.Is(err, io.EOF):
		return nil, err
	}
	rest, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return append(data[:n], rest...), nil
}

// Badger's entry meta bits (unexported there).
const (
	bitDelete       = 1 << 0
	bitValuePointer = 1 << 1
)

// checkKeyRegistry checks db/KEYREGISTRY: without encryption it is a
// random IV and the sanity text Badger checks.
func checkKeyRegistry(stateDir, path string) error {
	f, err := openStateFile(stateDir, path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // Badger writes a new one; it holds no data
	}
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return fmt.Errorf("read db/KEYREGISTRY: %w", err)
	}
	const sanity = "Hello Badger"
	if len(b) != 16+len(sanity) || string(b[16:]) != sanity {
		return damagef(stateDir, "db/KEYREGISTRY is not an unencrypted Badger key registry (%d bytes)", len(b))
	}
	return nil
}

// checkDiscard checks the size of db/DISCARD (Badger's value-log
// garbage-collection hints: 16-byte slots).
func checkDiscard(stateDir string, fi os.FileInfo) error {
	if fi == nil {
		return nil
	}
	if fi.Size() < 16 || fi.Size()%16 != 0 {
		return damagef(stateDir, "db/DISCARD is %d bytes, not a whole number of 16-byte slots", fi.Size())
	}
	return nil
}

func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "==") {
			return line
		}
	}
	return strings.TrimSpace(s)
}
