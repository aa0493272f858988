package main

// The corruption matrix: every file of a real crashed state damaged in
// every way a hostile tester tried, with the real binary.

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// readCommands are the read-only commands the matrix runs.
var readCommands = [][]string{
	{"state", "list"},
	{"plan", "-no-color"},
	{"history", "order/o-1"},
	{"history", "batch/b-1"},
	{"state", "check"},
}

type damageOp struct {
	name string
	do   func(path string) error
}

var damageOps = []damageOp{
	{"truncate 0", func(p string) error { return os.Truncate(p, 0) }},
	{"truncate half", func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		return os.Truncate(p, fi.Size()/2)
	}},
	{"truncate 14", func(p string) error { return os.Truncate(p, 14) }},
	{"flip first", flipByte(0, 1)},
	{"flip third", flipByte(1, 3)},
	{"flip middle", flipByte(1, 2)},
	{"flip last", flipByte(-1, 1)},
	{"delete", os.Remove},
}

// flipByte flips the byte at num/den of the file (-1: the last byte).
func flipByte(num, den int64) func(string) error {
	return func(p string) error {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || fi.Size() == 0 {
			return err
		}
		off := fi.Size() * num / den
		if num < 0 {
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

// TestCorruptionMatrix damages every file of a real, crashed state in
// every way the hostile tester did, and runs the read-only commands and
// then wf apply on it. Each read must print exactly what it printed for
// the undamaged state (the damage was harmless) or fail with exit 1 and
// an error naming the state directory; never panic, never print anything
// else; and leave the state directory exactly as it was. wf apply must
// either finish as it does on the undamaged state or fail the same clear
// way without changing a file.
func TestCorruptionMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("long: -short")
	}
	src := matrixState(t)
	scratch := matrixScratch(t)
	env := []string{"WF_STATE_DIR="} // the state is <config>/.wf
	// The matrix runs wf some 500 times: without the race detector in the
	// binary (the other tests have it) it takes a third of the time.
	bin := plainBinary(t)
	runWF := func(t *testing.T, env []string, args ...string) wfOut { return runBin(t, bin, env, args...) }

	// The undamaged baseline: what every read prints, and what apply
	// leaves.
	base := filepath.Join(scratch, "base")
	copyDirTree(t, src, base)
	want := map[string]wfOut{}
	before := treeState(t, filepath.Join(base, ".wf"))
	for _, args := range readCommands {
		o := runWF(t, env, append(args, base)...)
		if o.code != 0 {
			t.Fatalf("undamaged %v: exit %d\n%s", args, o.code, o.stderr)
		}
		want[strings.Join(args, " ")] = o
	}
	if d := treeDiff(before, treeState(t, filepath.Join(base, ".wf"))); d != "" {
		t.Fatalf("read-only commands changed the undamaged state: %s", d)
	}
	if o := runWF(t, env, "apply", "-auto-approve", base); o.code != 0 {
		t.Fatalf("undamaged apply: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	wantAfter := runWF(t, env, "state", "list", base).stdout
	if !strings.Contains(wantAfter, "batch/b-1  2 activities: 2 succeeded") {
		t.Fatalf("undamaged apply did not finish the batch:\n%s", wantAfter)
	}

	var files []string
	filepath.WalkDir(filepath.Join(src, ".wf"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(src, path)
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	counts := map[string]int{}
	applyCounts := map[string]int{}
	n := 0
	for _, rel := range files {
		for _, dm := range damageOps {
			n++
			name := rel + " " + dm.name
			dir := filepath.Join(scratch, fmt.Sprintf("case%d", n))
			copyDirTree(t, src, dir)
			if err := dm.do(filepath.Join(dir, rel)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			stateDir := filepath.Join(dir, ".wf")
			for _, args := range readCommands {
				key := strings.Join(args, " ")
				before := treeState(t, stateDir)
				o := runWF(t, env, append(args, dir)...)
				if d := treeDiff(before, treeState(t, stateDir)); d != "" {
					t.Errorf("%s: wf %s changed the state directory: %s", name, key, d)
				}
				switch w := want[key]; {
				case crashed(o):
					counts["crash"]++
					t.Errorf("%s: wf %s crashed:\n%s", name, key, o.stderr)
				case o.code == 0 && o.stdout == strings.ReplaceAll(w.stdout, base, dir):
					counts["harmless"]++
				case o.code == 0:
					counts["silent loss"]++
					t.Errorf("%s: wf %s printed something else (SILENT LOSS):\n%s\nwant:\n%s", name, key, o.stdout, w.stdout)
				case o.code == 1 && strings.Contains(o.stderr, stateDir):
					counts["clear error"]++
				default:
					counts["unclear error"]++
					t.Errorf("%s: wf %s: exit %d without naming %s:\n%s", name, key, o.code, stateDir, o.stderr)
				}
			}
			before := treeState(t, stateDir)
			o := runWF(t, env, "apply", "-auto-approve", dir)
			killHung(dir)
			switch {
			case crashed(o):
				applyCounts["crash"]++
				t.Errorf("%s: wf apply crashed:\n%s", name, o.stderr)
			case o.code == 0:
				if got := runWF(t, env, "state", "list", dir).stdout; got != wantAfter {
					applyCounts["silent loss"]++
					t.Errorf("%s: wf apply finished with another state (SILENT LOSS):\n%s\nwant:\n%s", name, got, wantAfter)
				} else {
					applyCounts["harmless"]++
				}
			case o.code == 1 && strings.Contains(o.stderr, stateDir):
				applyCounts["clear error"]++
				if d := treeDiff(before, treeState(t, stateDir)); d != "" {
					t.Errorf("%s: wf apply failed (%s) but changed files: %s", name, firstLineOf(o.stderr), d)
				}
			default:
				applyCounts["unclear error"]++
				t.Errorf("%s: wf apply: exit %d without naming %s:\n%s%s", name, o.code, stateDir, o.stdout, o.stderr)
			}
			os.RemoveAll(dir)
		}
	}
	t.Logf("%d files (%s) x %d damages: reads (x%d commands) %v; apply %v", len(files), strings.Join(files, " "), len(damageOps), len(readCommands), counts, applyCounts)
}

var plainBin struct {
	once sync.Once
	path string
	err  error
}

// plainBinary builds cmd/wf without the race detector, once.
func plainBinary(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		return durBinary(t)
	}
	plainBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "wf-bin-plain-")
		if err != nil {
			plainBin.err = err
			return
		}
		plainBin.path = filepath.Join(dir, "wf")
		if out, err := exec.Command("go", "build", "-o", plainBin.path, ".").CombinedOutput(); err != nil {
			plainBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if plainBin.err != nil {
		t.Fatal(plainBin.err)
	}
	return plainBin.path
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
