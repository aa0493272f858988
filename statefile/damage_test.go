package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// copyTree copies a state directory (regular files and directories).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := tryCopyTree(src, dst); err != nil {
		t.Fatal(err)
	}
}

func tryCopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		return copySparse(in, target)
	})
}

// flushedState builds a state big enough that Badger flushed memtables
// and the checkpoint moved on (so log segments were deleted), then kills
// nothing: it is closed cleanly unless crash is set, in which case a copy
// of the directory taken while the store is open is returned (what kill
// -9 at that moment leaves).
func flushedState(t *testing.T, crash bool) string {
	t.Helper()
	dir := filepath.Join(scratchDir(t), ".wf")
	s, err := Open(dir, Options{segmentSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 2000)
	// Until Badger has flushed a memtable and a later rotation noticed
	// (flushes run in the background, so a fast disk needs more commits).
	for i := 0; i < 4000 || s.w.cp.flushed == 0 && i < 40000; i++ {
		a := act("w", fmt.Sprintf("k%d", i/50), fmt.Sprintf("a%d", i%50), i%3 == 0)
		a.Outputs = json.RawMessage(fmt.Sprintf(`{"result":%q}`, big))
		commitT(t, s, record.Mutation{Activity: a}, record.Mutation{Attempt: att("w", fmt.Sprintf("k%d", i/50), fmt.Sprintf("a%d", i%50), 1, 1)})
	}
	if s.w.cp.flushed == 0 {
		t.Fatal("no checkpoint moved past 0: Badger never flushed")
	}
	segs, _ := filepath.Glob(filepath.Join(dir, walName, "*.wal"))
	if len(segs) > 60 {
		t.Fatalf("%d log segments kept: old ones are not deleted", len(segs))
	}
	if !crash {
		closeT(t, s)
		segs, _ = filepath.Glob(filepath.Join(dir, walName, "*.wal"))
		if len(segs) != 1 {
			t.Fatalf("%d log segments after a clean close, want 1", len(segs))
		}
		return dir
	}
	// More commits after the last checkpoint, so the log has records
	// that only it and the memtables hold.
	for i := range 50 {
		commitT(t, s, record.Mutation{Attempt: att("w", "tail", "a", 1, i+1)})
	}
	defer closeT(t, s)
	// Badger may compact while the copy is taken (a table gone between
	// listing and reading, or the MANIFEST newer than the tables read):
	// take copies until one is a state a crash could have left.
	for range 20 {
		img := filepath.Join(scratchDir(t), ".wf")
		if err := tryCopyTree(dir, img); err != nil {
			continue
		}
		if _, err := inspect(img); err == nil {
			return img
		}
	}
	t.Fatal("no consistent copy of the open store in 20 tries")
	return ""
}

// outcome opens a state (writer or reader), dumps it, and says what
// happened: the dump, or the error.
func outcome(t *testing.T, dir string, readOnly bool) (string, error) {
	t.Helper()
	s, err := Open(dir, Options{ReadOnly: readOnly})
	if err != nil {
		return "", err
	}
	defer s.Close()
	var b strings.Builder
	insts, err := s.Instances()
	if err != nil {
		return "", err
	}
	for _, in := range insts {
		acts, err := s.Activities(in.Workflow, in.Key)
		if err != nil {
			return "", err
		}
		atts, err := s.Attempts(in.Workflow, in.Key, "")
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %d %d\n", in.Address(), len(acts), len(atts))
	}
	timers, err := s.PendingTimers()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "timers %d\n", len(timers))
	return b.String(), nil
}

// TestDamagedStateIsAClearError damages a crashed state's files one at a
// time and requires, for a reader and for a writer, either the exact
// contents of the undamaged state or an error naming the state directory,
// with every file unchanged.
func TestDamagedStateIsAClearError(t *testing.T) {
	orig := flushedState(t, true)
	want, err := outcome(t, copyOf(t, orig), true)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(orig, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(orig, path)
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	type damage struct {
		name string
		do   func(path string) error
	}
	damages := []damage{
		{"delete", os.Remove},
		{"truncate 0", func(p string) error { return os.Truncate(p, 0) }},
		{"truncate 14", func(p string) error { return os.Truncate(p, 14) }},
		{"truncate half", func(p string) error {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			return os.Truncate(p, fi.Size()/2)
		}},
		{"flip 600", flipAt(600)},
		{"flip middle", flipAt(-2)},
		{"flip last", flipAt(-1)},
	}
	// These hold what was committed: damage to them is always an error.
	// (The others are harmless or caught depending on the byte: an
	// older checkpoint slot, a memtable log the log supersedes, Badger's
	// GC hints, wf's own lock and log files.)
	mustFail := func(rel, dmg string) bool {
		switch {
		case strings.HasPrefix(rel, walName+"/"), rel == "db/MANIFEST", strings.HasSuffix(rel, ".sst"):
			return true
		case rel == checkpointName:
			return !strings.HasPrefix(dmg, "flip")
		}
		return false
	}
	writerDamages := map[string]bool{"delete": true, "flip middle": true}
	if raceEnabled {
		// Badger under the race detector is slow; the cmd/wf corruption
		// matrix covers every damage end to end.
		damages = []damage{damages[0], damages[3], damages[5]}
		writerDamages = map[string]bool{"flip middle": true}
	}
	counts := map[string]int{}
	for _, rel := range files {
		for _, dm := range damages {
			for _, ro := range []bool{true, false} {
				if !ro && !writerDamages[dm.name] {
					continue // the writer's checks are the reader's; a sample keeps this test short
				}
				name := fmt.Sprintf("%s/%s/ro=%v", rel, dm.name, ro)
				dir := copyOf(t, orig)
				if err := dm.do(filepath.Join(dir, rel)); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				before := snapshotTree(t, dir)
				got, err := outcome(t, dir, ro)
				switch {
				case err == nil && got == want:
					counts["harmless"]++
					if mustFail(rel, dm.name) {
						t.Errorf("%s: damage accepted", name)
					}
				case err == nil:
					counts["silent loss"]++
					t.Errorf("%s: SILENT LOSS: got\n%s\nwant\n%s", name, got, want)
				default:
					counts["clear error"]++
					if !strings.Contains(err.Error(), dir) {
						t.Errorf("%s: error does not name the state directory: %v", name, err)
					}
					if d := diffTrees(before, snapshotTree(t, dir)); len(d) > 0 {
						t.Errorf("%s: failed with %v but changed files:\n%s", name, err, strings.Join(d, "\n"))
					}
				}
			}
		}
	}
	t.Logf("%d files x %d damages (reader), x %d (writer): %v", len(files), len(damages), len(writerDamages), counts)
}

// scratchDir is a temporary directory for throw-away copies of states, in
// memory (/dev/shm) when the machine has it: the damage tests copy and
// hash hundreds of states, and a busy disk would make that minutes.
func scratchDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "wf-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func copyOf(t *testing.T, src string) string {
	dst := filepath.Join(scratchDir(t), ".wf")
	copyTree(t, src, dst)
	return dst
}

// flipAt flips one byte at off (negative: -1 the last byte, -2 the middle).
func flipAt(off int64) func(string) error {
	return func(p string) error {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.Size() == 0 {
			return nil
		}
		switch off {
		case -1:
			off = fi.Size() - 1
		case -2:
			off = fi.Size() / 2
		}
		if off >= fi.Size() {
			off = fi.Size() - 1
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			return err
		}
		b[0] ^= 0x5a
		_, err = f.WriteAt(b, off)
		return err
	}
}

// TestOlderDatabaseIsDamage replaces db/ with a copy taken earlier: the
// checkpoint knows the database was further along.
func TestOlderDatabaseIsDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	s, err := Open(dir, Options{segmentSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	commitT(t, s, record.Mutation{Instance: inst("w", "k")})
	closeT(t, s)
	old := filepath.Join(t.TempDir(), "db")
	copyTree(t, filepath.Join(dir, dbName), old)
	s = openT(t, dir)
	for i := range 3000 {
		a := act("w", "k", fmt.Sprintf("a%d", i), false)
		a.Outputs = json.RawMessage(fmt.Sprintf(`{"result":%q}`, strings.Repeat("y", 2000)))
		commitT(t, s, record.Mutation{Activity: a})
	}
	closeT(t, s)
	if err := os.RemoveAll(filepath.Join(dir, dbName)); err != nil {
		t.Fatal(err)
	}
	copyTree(t, old, filepath.Join(dir, dbName))
	for _, ro := range []bool{true, false} {
		_, err := Open(dir, Options{ReadOnly: ro})
		var de *DamageError
		if !errors.As(err, &de) {
			t.Fatalf("read-only %v: an older database accepted: %v", ro, err)
		}
		t.Logf("%v", err)
	}
}

// TestForeignSegmentIsDamage puts another state's log segment in place of
// this one's.
func TestForeignSegmentIsDamage(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), ".wf"), filepath.Join(t.TempDir(), ".wf")
	for _, dir := range []string{a, b} {
		s := openT(t, dir)
		commitT(t, s, record.Mutation{Instance: inst("w", "k")})
		closeT(t, s)
	}
	segs, _ := filepath.Glob(filepath.Join(b, walName, "*.wal"))
	for _, p := range segs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(a, walName, filepath.Base(p)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(a, Options{})
	if err == nil || !strings.Contains(err.Error(), "belongs to another state") {
		t.Fatalf("foreign segment: %v", err)
	}
}

// TestTornTailIsRepairedByTheWriter cuts the last record of a crashed
// state's log as a crash mid-write would: readers accept it and change
// nothing; the writer clears it; the record is gone (it was never
// acknowledged), everything before it is there.
func TestTornTailIsRepairedByTheWriter(t *testing.T) {
	dir := flushedState(t, true)
	segs, _ := filepath.Glob(filepath.Join(dir, walName, "*.wal"))
	sort.Strings(segs)
	last := segs[len(segs)-1]
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := decodeSegHeader(data)
	sc, err := scanSegment(data, h, true)
	if err != nil || len(sc.records) == 0 {
		t.Fatalf("%v, %d records", err, len(sc.records))
	}
	// Append a record of several sectors and lose its second sector.
	rec := encodeRecord(sc.records[len(sc.records)-1].seq+1, 0, appendOps(nil, []op{{kind: opSet, key: instanceKey("w", "torn"), val: []byte(strings.Repeat("z", 2000))}}))
	copy(data[sc.end:], rec)
	clear(data[sc.end+sectorSize : sc.end+2*sectorSize])
	if err := os.WriteFile(last, data, 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, dir)
	rep, err := Check(dir, Options{})
	if err != nil || rep.TornRecord == 0 {
		t.Fatalf("check: %+v, %v", rep, err)
	}
	if d := diffTrees(before, snapshotTree(t, dir)); len(d) > 0 {
		t.Fatalf("check changed files: %v", d)
	}
	s := openT(t, dir)
	if in, err := s.Instance("w", "torn"); err != nil || in != nil {
		t.Fatalf("the torn record was applied: %v %v", in, err)
	}
	if atts, err := s.Attempts("w", "tail", "a"); err != nil || len(atts) != 50 {
		t.Fatalf("%d attempts before the torn record, %v", len(atts), err)
	}
	commitT(t, s, record.Mutation{Instance: inst("w", "after")})
	closeT(t, s)
	rep, err = Check(dir, Options{})
	if err != nil || rep.TornRecord != 0 {
		t.Fatalf("after the writer: %+v, %v", rep, err)
	}
}
