package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileDirectoryMoved: a directory moved between a write's
// temporary file and its rename gets the whole file, under its name, and
// keeps no temporary file; a write whose rename fails removes its
// temporary file from the directory wherever it went.
func TestWriteFileDirectoryMoved(t *testing.T) {
	m := New(Options{NoRuntime: true})
	parent := t.TempDir()
	dir := filepath.Join(parent, "textfile")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(parent, "moved")
	path := filepath.Join(dir, "wf.prom")
	err := m.writeFile(path, func() {
		if err := os.Rename(dir, moved); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatalf("write into a directory moved meanwhile: %v", err)
	}
	entries := func(d string) []string {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	if got := entries(moved); len(got) != 1 || got[0] != "wf.prom" {
		t.Errorf("the moved directory holds %q, want only wf.prom", got)
	}
	b, err := os.ReadFile(filepath.Join(moved, "wf.prom"))
	if err != nil || !strings.Contains(string(b), "wf_running_attempts 0") {
		t.Errorf("the moved directory's wf.prom: %q, %v", b, err)
	}

	// The next write looks for the directory at path again.
	if err := m.WriteFile(path); err == nil {
		t.Error("a write to a directory that is gone succeeded")
	}

	// A rename that fails (wf.prom is a non-empty directory) after the
	// directory moved: the temporary file goes, from where it is.
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = m.writeFile(path, func() {
		if err := os.Rename(dir, moved); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil {
		t.Fatal("a rename over a non-empty directory succeeded")
	}
	if got := entries(moved); len(got) != 1 || got[0] != "wf.prom" {
		t.Errorf("after a failed write the moved directory holds %q, want only wf.prom (the blocking directory)", got)
	}
}
