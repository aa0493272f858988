package statefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"

	"github.com/wf-engine/wf/statefile/record"
)

// TestTableCutShortWhileCheckedIsDamage: the tables are checked through
// a mapping of each file; a file cut short meanwhile faults on the pages
// past its new end, which must end as a damage error, not as a crash of
// the process, whether the cut leaves a page of it or nothing.
func TestTableCutShortWhileCheckedIsDamage(t *testing.T) {
	for _, size := range []int64{0, 4096} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := filepath.Join(scratchDir(t), ".wf")
			s := openT(t, dir)
			for i := range 2000 {
				commitT(t, s, record.Mutation{Activity: act("w", fmt.Sprintf("k%d", i/100), fmt.Sprintf("a%d", i%100), true)})
			}
			closeT(t, s) // Badger flushes its memtable into a table
			tables, _ := filepath.Glob(filepath.Join(dir, dbName, "*.sst"))
			if len(tables) == 0 {
				t.Fatal("no table after a clean close")
			}
			if fi, err := os.Stat(tables[0]); err != nil || fi.Size() <= 2*4096 {
				t.Fatalf("table %s: %v, %d bytes: too small to cut", tables[0], err, fi.Size())
			}
			cut := 0
			tableMapped = func(path string) {
				if err := os.Truncate(path, size); err != nil {
					t.Error(err)
				}
				cut++
			}
			defer func() { tableMapped = nil }()
			_, err := Open(dir, Options{})
			if cut == 0 {
				t.Fatal("no table was mapped")
			}
			var de *DamageError
			if !errors.As(err, &de) || !strings.Contains(de.What, ".sst is damaged: cut short while it was checked") {
				t.Fatalf("Open of a state whose tables were cut short while checked: %v, want a damage error naming a table", err)
			}
		})
	}
}

// TestVerifyBlocksMatchesBadger: the block checks done by hand find what
// Badger's Table.VerifyChecksum finds: nothing in intact tables, and a
// byte flipped in any block (its entries, its entry offsets, its checksum
// or that checksum's length; a few bytes of every block) fails both.
func TestVerifyBlocksMatchesBadger(t *testing.T) {
	dir := filepath.Join(scratchDir(t), ".wf")
	s := openT(t, dir)
	for i := range 3000 {
		commitT(t, s, record.Mutation{Activity: act("w", fmt.Sprintf("k%d", i/100), fmt.Sprintf("a%d", i%100), true)})
	}
	closeT(t, s)
	tables, _ := filepath.Glob(filepath.Join(dir, dbName, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table after a clean close")
	}
	open := func(data []byte, id uint64) (*table.Table, error) {
		opt := badgerOptions("", nil)
		return table.OpenInMemoryTable(data, id, &table.Options{BlockSize: opt.BlockSize, BloomFalsePositive: opt.BloomFalsePositive, ChkMode: options.OnTableRead})
	}
	flips := 0
	for _, path := range tables {
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := table.ParseFileID(path)
		tb, err := open(orig, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := verifyBlocks(orig, tb); err != nil {
			t.Fatalf("%s intact: %v", path, err)
		}
		// Every block's offsets, from the index Badger decoded.
		index := fb.GetRootAsTableIndex(orig[len(orig)-8-int(binary.BigEndian.Uint32(orig[len(orig)-4:]))-tb.IndexSize():], 0)
		var ko fb.BlockOffset
		for i := range index.OffsetsLength() {
			index.Offsets(&ko, i)
			off, size := int(ko.Offset()), int(ko.Len())
			for _, at := range []int{off, off + size/2, off + size - 9, off + size - 5, off + size - 1} {
				data := bytes.Clone(orig)
				data[at] ^= 0x40
				var tb *table.Table
				if err := recovered(func() (err error) { tb, err = open(data, id); return err }); err != nil {
					continue // the first and last blocks are read when the table opens
				}
				flips++
				// verifyTable recovers a panic of Badger's as damage.
				ours := recovered(func() error { return verifyBlocks(data, tb) })
				theirs := recovered(tb.VerifyChecksum)
				if ours == nil || theirs == nil {
					t.Errorf("%s block %d, byte %d flipped: verifyBlocks %v, Badger %v; want both to fail", filepath.Base(path), i, at-off, ours, theirs)
				}
			}
		}
	}
	t.Logf("%d flips checked in %d tables", flips, len(tables))
	if flips < 10 {
		t.Fatalf("only %d flips checked", flips)
	}
}

func recovered(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}
