package statefile

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// TestBigValuesDoNotGrowTheLog: outputs big enough for Badger's value log
// barely fill memtables, so Badger would not flush on its own; the store
// makes it, and the log stays bounded.
func TestBigValuesDoNotGrowTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	s := openT(t, dir)
	const size = 200 << 10
	big := strings.Repeat("v", size)
	// Outputs for more than the log may keep (plus the segments a
	// checkpoint may lag by), so the store must make Badger flush.
	n := int((maxRetainedLog + 3*defaultSegmentSize) / size)
	for i := range n {
		a := act("w", "k", fmt.Sprintf("a%d", i), false)
		a.Outputs = json.RawMessage(fmt.Sprintf(`{"stdout":%q}`, big))
		commitT(t, s, record.Mutation{Activity: a})
	}
	segs, _ := filepath.Glob(filepath.Join(dir, walName, "*.wal"))
	if kept := int64(len(segs)) * defaultSegmentSize; kept > maxRetainedLog+2*defaultSegmentSize {
		t.Fatalf("%d log segments (%d MiB) kept for %d MiB of big values", len(segs), kept>>20, n*size>>20)
	}
	if s.w.cp.flushed == 0 {
		t.Fatal("the checkpoint never moved")
	}
	closeT(t, s)
	s = openT(t, dir)
	defer closeT(t, s)
	acts, err := s.Activities("w", "k")
	if err != nil || len(acts) != n {
		t.Fatalf("%d activities, %v", len(acts), err)
	}
}
