package statefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

// TestNewStateModes: the state directory is 0700 and every file in it
// 0600, whatever the umask lets Badger do.
func TestNewStateModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "cfg", ".wf")
	s := openT(t, dir)
	commitT(t, s, record.Mutation{Instance: inst("w", "k")})
	check := func(when string) {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Lstat(path)
			if err != nil {
				return err
			}
			want := fs.FileMode(0o600)
			if fi.IsDir() {
				want = 0o700
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s: %s has mode %04o, want %04o", when, path, fi.Mode().Perm(), want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check("open")
	closeT(t, s)
	check("closed")
}

// TestExistingDirIsTightened: a writer makes an existing 0755 state
// directory 0700.
func TestExistingDirIsTightened(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A reader leaves it alone (it may not change anything)...
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, ro)
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Fatalf("a reader changed the mode to %04o", fi.Mode().Perm())
	}
	// ...a writer tightens it.
	closeT(t, openT(t, dir))
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %04o after a writer, want 0700", fi.Mode().Perm())
	}
}

func TestUnsafeDirIsRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"group writable", func(t *testing.T, dir string) { chmod(t, dir, 0o770) }, "writable by group or others"},
		{"world writable", func(t *testing.T, dir string) { chmod(t, dir, 0o707) }, "writable by group or others"},
		{"world writable db", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, dbName), 0o777) }, "db is writable by group or others"},
		{"owned by someone else", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				if os.Getenv("CI") != "" {
					t.Fatal("chown to another user needs root; CI runs as root")
				}
				t.Skip("chown needs root (CI runs as root)")
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".wf")
			closeT(t, openT(t, dir))
			tt.setup(t, dir)
			before := snapshotTree(t, dir)
			for _, ro := range []bool{true, false} {
				_, err := Open(dir, Options{ReadOnly: ro})
				var ue *UnsafeError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("read-only %v: %v, want an *UnsafeError naming %s and saying %q", ro, err, dir, tt.want)
				}
			}
			if d := diffTrees(before, snapshotTree(t, dir)); len(d) > 0 {
				t.Fatalf("a refused open changed files: %v", d)
			}
		})
	}
}

func chmod(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestPlantedLinksAreRefused plants symbolic links (to an existing file,
// and dangling) where wf keeps its files: every open refuses the state,
// the target is untouched and a dangling target is not created.
func TestPlantedLinksAreRefused(t *testing.T) {
	names := []string{lockName, logName, logOldName, checkpointName, gitignoreName, socketName, dbName, walName,
		"db/MANIFEST", "db/KEYREGISTRY", "db/000001.sst", "db/000001.vlog", "db/00001.mem", "db/DISCARD",
		"wal/0000000000000001.wal", "wal/0000000000000009.wal"}
	for _, name := range names {
		for _, dangling := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/existing", true: "/dangling"}[dangling], func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), ".wf")
				s := openT(t, dir)
				commitT(t, s, record.Mutation{Instance: inst("w", "k")})
				closeT(t, s)
				victim := filepath.Join(t.TempDir(), "victim")
				if !dangling {
					writeFile(t, victim, "precious")
				}
				p := filepath.Join(dir, name)
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(victim, p); err != nil {
					t.Fatal(err)
				}
				vBefore, _ := os.Stat(victim)
				for _, ro := range []bool{true, false} {
					s, err := Open(dir, Options{ReadOnly: ro})
					if err == nil {
						s.Close()
						t.Fatalf("read-only %v: a planted link at %s accepted", ro, name)
					}
					if !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), dir) {
						t.Errorf("read-only %v: %v; want it to name %s and say symbolic link", ro, err, dir)
					}
				}
				vAfter, err := os.Stat(victim)
				switch {
				case dangling && err == nil:
					t.Fatalf("the dangling link's target was created")
				case !dangling && (err != nil || vAfter.Size() != vBefore.Size() || !vAfter.ModTime().Equal(vBefore.ModTime())):
					t.Fatalf("the link's target was touched: %v", err)
				}
			})
		}
	}
}

// TestReadersShareWritersExclude: readers hold the lock shared (any number
// at once); a writer fails on them (or waits with LockTimeout) and they
// fail on a writer.
func TestReadersShareWritersExclude(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	closeT(t, openT(t, dir))
	r1, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	var le *LockedError
	if _, err := Open(dir, Options{}); !errors.As(err, &le) {
		t.Fatalf("writer while readers read: %v, want *LockedError", err)
	}
	closeT(t, r2)
	go func() {
		time.Sleep(300 * time.Millisecond)
		r1.Close()
	}()
	start := time.Now()
	w, err := Open(dir, Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("writer with a timeout: %v", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("the writer got the lock after %v, before the reader let go", waited)
	}
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("reader while a writer writes: %v, want *LockedError naming this process", err)
	}
	start = time.Now()
	if _, err := Open(dir, Options{LockTimeout: 200 * time.Millisecond}); !errors.As(err, &le) {
		t.Fatalf("second writer: %v", err)
	} else if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("gave up after %v, before its timeout", waited)
	}
	closeT(t, w)
}

// TestMissingStateReadsEmpty: a reader of a directory that does not exist
// sees an empty state and creates nothing.
func TestMissingStateReadsEmpty(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "cfg", ".wf")
	s, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	insts, err := s.Instances()
	if err != nil || len(insts) != 0 {
		t.Fatalf("%v %v", insts, err)
	}
	if acts, err := s.Activities("w", "k"); err != nil || len(acts) != 0 {
		t.Fatalf("%v %v", acts, err)
	}
	closeT(t, s)
	if _, err := os.Stat(filepath.Join(parent, "cfg")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a reader created something: %v", err)
	}
}
