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
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"
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
			// A table file cut short while it is mapped faults on the
			// pages past its new end: a panic verifyTable recovers,
			// not a crash of the process.
			debug.SetPanicOnFault(true)
			for i := range work {
				path := table.NewFilename(ids[i], dbDir)
				results[i].meta, results[i].err = verifyTable(path, tables[ids[i]])
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

// tableMapped, when set (by tests), is called once a table is mapped.
var tableMapped func(path string)

// verifyTable checks one table. Its goroutine must have
// debug.SetPanicOnFault set.
func verifyTable(path string, tm badger.TableManifest) (meta [3]metaValue, err error) {
	f, err := openNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return meta, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return meta, err
	}
	if fi.Size() == 0 {
		return meta, errors.New("empty file")
	}
	if int64(int(fi.Size())) != fi.Size() {
		return meta, fmt.Errorf("%d bytes: too large to map", fi.Size())
	}
	// The table is mapped read-only, private and populated (one system
	// call maps every page the page cache holds) rather than read into
	// a buffer: reading copied the tables' tens of MB into memory that
	// was allocated and cleared for them at every open (15 MB and a
	// sixth of the CPU of opening and closing a state of 100,000
	// activities). Damage still ends as an error: reading past the
	// mapping is a bounds check, a page past the end of a file that
	// shrank meanwhile a fault, both recovered below, and nothing but
	// this function unmaps it.
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return meta, fmt.Errorf("map: %w", err)
	}
	defer syscall.Munmap(data)
	if tableMapped != nil {
		tableMapped(path)
	}
	id, ok := table.ParseFileID(path)
	if !ok {
		return meta, errors.New("not a table file name")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt table (%s)", firstLine(fmt.Sprint(r)))
			if now, serr := f.Stat(); serr == nil && now.Size() < fi.Size() {
				// A fault on a page past the file's new end (Badger's
				// own recovery of it says nothing useful).
				err = fmt.Errorf("cut short while it was checked (%d bytes, was %d)", now.Size(), fi.Size())
			}
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
		return meta, errors.New(firstLine(err.Error()))
	}
	t.MmapFile.Fd = f // for Badger's error messages; never closed through t
	if err := verifyBlocks(data, t); err != nil {
		return meta, errors.New(firstLine(err.Error()))
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
			return meta, fmt.Errorf("meta key %q is stored in the value log", k)
		}
	}
	// What was checked is the file as it was mapped; Badger opens it as
	// it is now (no one writes a table under the lock).
	now, err := f.Stat()
	if err != nil {
		return meta, err
	}
	if now.Size() != fi.Size() {
		return meta, fmt.Errorf("changed while it was checked (%d bytes, was %d)", now.Size(), fi.Size())
	}
	return meta, nil
}

// verifyBlocks checks every block of t (mapped whole at data) against the
// checksum stored in it, the same bytes against the same checksums as
// Table.VerifyChecksum, without what that costs per block besides the
// checksum itself (a Block and its reference count, a deferred release, a
// protobuf unmarshalled by reflection, a global counter): a third of the
// CPU of checking the tables of 100,000 activities at every open. A
// compressed table (wf writes none, but a state written with Badger's
// default options would hold them) goes through Badger's own check, which
// decompresses each block first.
func verifyBlocks(data []byte, t *table.Table) error {
	if t.CompressionType() != options.None {
		return t.VerifyChecksum()
	}
	// The index sits before the footer (index length, the index's
	// checksum, that checksum's length); OpenInMemoryTable checked it.
	n := len(data)
	if n < 8 {
		return errors.New("table too short for its footer")
	}
	chkLen := int(binary.BigEndian.Uint32(data[n-4:]))
	end := n - 4 - chkLen - 4
	if chkLen > n || end < t.IndexSize() {
		return errors.New("table footer does not fit the table")
	}
	index := fb.GetRootAsTableIndex(data[end-t.IndexSize():end], 0)
	var ko fb.BlockOffset
	var cs pb.Checksum
	for i := range index.OffsetsLength() {
		if !index.Offsets(&ko, i) {
			return fmt.Errorf("block %d is not in the table index", i)
		}
		off, size := int(ko.Offset()), int(ko.Len())
		if off < 0 || size < 4 || off+size > n {
			return fmt.Errorf("checksum validation failed for table: %s, block: %d, offset:%d: block of %d bytes does not fit the table", t.Filename(), i, off, size)
		}
		blk := data[off : off+size]
		// A block ends with its checksum (a pb.Checksum) and that
		// checksum's length; the checksum covers what precedes it.
		bl := int(binary.BigEndian.Uint32(blk[size-4:]))
		if bl > size-4 {
			return fmt.Errorf("checksum validation failed for table: %s, block: %d, offset:%d: invalid checksum length", t.Filename(), i, off)
		}
		body, sum := blk[:size-4-bl], blk[size-4-bl:size-4]
		if !decodeChecksum(sum, &cs) {
			// Not the two fields Badger writes: its own check decodes
			// (or refuses) it the general way.
			return t.VerifyChecksum()
		}
		if err := y.VerifyChecksum(body, &cs); err != nil {
			return fmt.Errorf("checksum validation failed for table: %s, block: %d, offset:%d: %w", t.Filename(), i, off, err)
		}
	}
	return nil
}

// decodeChecksum decodes a block's pb.Checksum by hand: its two fields,
// algo (1) and sum (2), as varints, the algorithm one Badger knows; false
// for anything else.
func decodeChecksum(b []byte, cs *pb.Checksum) bool {
	cs.Algo, cs.Sum = pb.Checksum_CRC32C, 0
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 || tag&7 != 0 { // 0: the varint wire type
			return false
		}
		b = b[n:]
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return false
		}
		b = b[n:]
		switch tag >> 3 {
		case 1:
			if v != uint64(pb.Checksum_CRC32C) && v != uint64(pb.Checksum_XXHash64) {
				return false
			}
			cs.Algo = pb.Checksum_Algorithm(v)
		case 2:
			cs.Sum = v
		default:
			return false
		}
	}
	return true
}

// readWhole reads a file into a buffer of its size (io.ReadAll would grow
// and clear a buffer several times over: a third of the checks' CPU on a
// state with tens of megabytes of tables). A file that grew meanwhile is
// read to its end all the same.
func readWhole(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, fi.Size())
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
