package metrics

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFailureCause: the failures of one lasting condition read the same
// whatever step of WriteFile met them, so FileWriter warns once; another
// condition reads differently, so it is warned about too.
func TestFailureCause(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gone", "wf.prom")
	_, createErr := os.CreateTemp(filepath.Dir(path), ".wf.prom.*.tmp")
	renameErr := os.Rename(filepath.Join(dir, "gone", ".wf.prom.1.tmp"), path)
	if createErr == nil || renameErr == nil {
		t.Fatalf("create %v, rename %v: want both to fail", createErr, renameErr)
	}
	full := &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	tests := []struct {
		name string
		a, b error
		same bool
	}{
		{"the directory gone, at the create and at the rename", fileErr(path, createErr), fileErr(path, renameErr), true},
		{"the same step twice", fileErr(path, createErr), fileErr(path, createErr), true},
		{"the directory gone, then the disk full", fileErr(path, createErr), fileErr(path, full), false},
		{"a failure, then none", fileErr(path, full), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := failureCause(tt.a), failureCause(tt.b)
			if (a == b) != tt.same {
				t.Errorf("causes %q and %q: same = %v, want %v", a, b, a == b, tt.same)
			}
			if tt.a != nil && a == "" {
				t.Errorf("a failure has no cause: %v", tt.a)
			}
		})
	}
	if c := failureCause(nil); c != "" {
		t.Errorf("no failure has cause %q", c)
	}
}
