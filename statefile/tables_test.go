package statefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
