package statefile

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// TestSpareSegment: the next log segment is prepared in the background
// once the active one is half full and taken by the rotation; Close
// removes an unused one; a crash image holding one opens read-only as it
// is, and a writer removes it and loses nothing.
func TestSpareSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	spare := filepath.Join(dir, walName, spareName)
	s, err := Open(dir, Options{segmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	n, sawSpare, rotations := 0, false, 0
	for rotations < 4 {
		first := s.w.wal.first
		n++
		commitT(t, s, record.Mutation{Activity: act("w", "k", fmt.Sprintf("a%d", n), true)})
		if s.w.wal.spare != nil {
			sawSpare = true
		}
		if s.w.wal.first != first {
			rotations++
		}
	}
	if !sawSpare {
		t.Fatal("no spare segment was prepared before a rotation")
	}
	// Make the spare exist on disk, then take a crash image.
	for s.w.wal.spare == nil {
		n++
		commitT(t, s, record.Mutation{Activity: act("w", "k", fmt.Sprintf("a%d", n), true)})
	}
	sp := <-s.w.wal.spare
	s.w.wal.spare = make(chan spareSegment, 1)
	s.w.wal.spare <- sp
	if sp.err != nil {
		t.Fatal(sp.err)
	}
	img := filepath.Join(t.TempDir(), ".wf")
	copyTree(t, dir, img)
	closeT(t, s)
	if _, err := os.Lstat(spare); !os.IsNotExist(err) {
		t.Fatalf("Close left %s (%v)", spare, err)
	}

	imgSpare := filepath.Join(img, walName, spareName)
	if _, err := os.Lstat(imgSpare); err != nil {
		t.Fatalf("crash image has no spare: %v", err)
	}
	ro, err := Open(img, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a crash image with a spare segment: %v", err)
	}
	acts, err := ro.Activities("w", "k")
	if err != nil || len(acts) != n {
		t.Fatalf("read-only: %d activities (%v), want %d", len(acts), err, n)
	}
	closeT(t, ro)
	if _, err := os.Lstat(imgSpare); err != nil {
		t.Fatalf("a read-only open removed the spare: %v", err)
	}
	w := openT(t, img)
	if _, err := os.Lstat(imgSpare); !os.IsNotExist(err) {
		t.Fatalf("a writer's open left the spare (%v)", err)
	}
	acts, err = w.Activities("w", "k")
	if err != nil || len(acts) != n {
		t.Fatalf("after recovery: %d activities (%v), want %d", len(acts), err, n)
	}
	closeT(t, w)
}
