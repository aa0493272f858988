package statefile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/wf-engine/wf/statefile/record"
)

// helperEnv makes the test binary, run as a child, hold a state directory's
// lock until its stdin closes.
const helperEnv = "WF_STATEFILE_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(holdLock(dir))
	}
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

func holdLock(dir string) int {
	s, err := Open(dir, Options{Command: "wf apply -auto-approve"})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// startHolder runs a child process holding dir's lock.
func startHolder(t *testing.T, dir string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	return cmd, stdin
}

func TestLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	_, err := Open(dir, Options{})
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second Open: %v, want *LockedError", err)
	}
	if le.PID != os.Getpid() || le.Command != "wf test" || le.Path != dir {
		t.Fatalf("LockedError %+v", le)
	}
	want := fmt.Sprintf("state is locked by PID %d (wf test, since ", os.Getpid())
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "): another wf is using "+dir) {
		t.Fatalf("message %q", err)
	}
	closeT(t, s)
	s = openT(t, dir) // released by Close
	closeT(t, s)
}

func TestLockOtherProcess(t *testing.T) {
	tests := []struct {
		name    string
		release func(cmd *exec.Cmd, stdin io.WriteCloser) error
	}{
		{"holder closes", func(cmd *exec.Cmd, stdin io.WriteCloser) error {
			_ = stdin.Close()
			return cmd.Wait()
		}},
		{"holder killed", func(cmd *exec.Cmd, _ io.WriteCloser) error {
			// kill -9: the kernel drops the flock, so no stale lock.
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".wf")
			cmd, stdin := startHolder(t, dir)
			_, err := Open(dir, Options{})
			var le *LockedError
			if !errors.As(err, &le) {
				t.Fatalf("Open while a child holds the lock: %v", err)
			}
			if le.PID != cmd.Process.Pid || le.Command != "wf apply -auto-approve" || time.Since(le.Since) > time.Minute {
				t.Fatalf("LockedError %+v, want PID %d", le, cmd.Process.Pid)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("PID %d (wf apply -auto-approve, since", cmd.Process.Pid)) {
				t.Fatalf("message %q does not name the holder", err)
			}
			if err := tt.release(cmd, stdin); err != nil {
				t.Fatalf("holder: %v", err)
			}
			s := openT(t, dir)
			closeT(t, s)
		})
	}
}

func TestLockedErrorMessage(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		err  LockedError
		want string
	}{
		{LockedError{Path: "/x/.wf", PID: 1234, Since: since, Command: "wf apply"},
			"state is locked by PID 1234 (wf apply, since 2026-01-02T03:04:05Z): another wf is using /x/.wf"},
		{LockedError{Path: "/x/.wf", PID: 7},
			"state is locked by PID 7: another wf is using /x/.wf"},
		{LockedError{Path: "/x/.wf"},
			"state is locked by another process: another wf is using /x/.wf"},
		{LockedError{Path: "/x/.wf", PID: 7, Command: "wf apply", Exited: true},
			"state is locked by another process: another wf is using /x/.wf (the lock file names PID 7 (wf apply), which is no longer running: a process it started may still hold the lock, or a new holder has not written its details yet)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}

func TestSchemaMismatch(t *testing.T) {
	tests := []struct {
		stored string
		want   string
	}{
		{"4", "state in DIR uses schema 4; this wf supports 3: upgrade wf"},
		{"0", "state in DIR uses schema 0; this wf supports 3: the state is too old"},
		{"x", `schema version "x" is not a number: not a wf state directory`},
	}
	for _, tt := range tests {
		t.Run(tt.stored, func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir)
			// Behind the log's back, once Open's own schema record is in.
			if err := s.w.waitApplied(); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keySchema, []byte(tt.stored)) }); err != nil {
				t.Fatal(err)
			}
			closeT(t, s)
			_, err := Open(dir, Options{})
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open: %v, want %q", err, want)
			}
			// The failed Open released the lock and the database.
			if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			f, _ := os.Open(filepath.Join(dir, lockName))
			defer f.Close()
			if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatalf("lock still held after a failed Open: %v", err)
			}
		})
	}
}

// TestCorruptOrForeign checks that every kind of bad directory is a clear
// error, never a panic and never silently adopted.
func TestCorruptOrForeign(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"file in place of the state dir", func(t *testing.T, dir string) {
			writeFile(t, dir, "not a directory")
		}, "exists and is not a directory"},
		{"file in place of db", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "db"), "x")
		}, "db is not a directory"},
		{"foreign files in db", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "db", "notes.txt"), "hello")
		}, "no Badger MANIFEST: not a wf state directory"},
		{"badger db of someone else", func(t *testing.T, dir string) {
			foreignDB(t, dir, options.None)
		}, "has data but no wf schema version: not a wf state directory"},
		{"compressed badger db of someone else", func(t *testing.T, dir string) {
			// Tables do not record their compression, so this reads as corrupt.
			foreignDB(t, dir, options.Snappy)
		}, "has data but no wf schema version: not a wf state directory"},
		{"garbage MANIFEST", func(t *testing.T, dir string) {
			makeStore(t, dir)
			writeFile(t, filepath.Join(dir, "db", "MANIFEST"), "this is not a manifest at all, just some text")
		}, "db/MANIFEST is unreadable"},
		{"truncated MANIFEST", func(t *testing.T, dir string) {
			makeStore(t, dir)
			writeFile(t, filepath.Join(dir, "db", "MANIFEST"), "")
		}, "db/MANIFEST is unreadable"},
		{"MANIFEST is a directory", func(t *testing.T, dir string) {
			makeStore(t, dir)
			p := filepath.Join(dir, "db", "MANIFEST")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "db/MANIFEST is not a regular file"},
		{"garbage tables", func(t *testing.T, dir string) {
			makeStore(t, dir)
			ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
			if len(ssts) == 0 {
				t.Fatal("no tables written")
			}
			for _, p := range ssts {
				writeFile(t, p, strings.Repeat("garbage!", 1000))
			}
		}, ".sst is damaged: corrupt table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".wf")
			tt.setup(t, dir)
			s, err := Open(dir, Options{})
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want an error containing %q", tt.want)
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("Open: %v\nwant it to name %s and contain %q", err, dir, tt.want)
			}
		})
	}
}

func foreignDB(t *testing.T, dir string, c options.CompressionType) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil).WithCompression(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("user:1"), []byte("bob")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// makeStore writes a store with enough data that Close flushes tables.
func makeStore(t *testing.T, dir string) {
	t.Helper()
	s := openT(t, dir)
	var muts []record.Mutation
	for i := range 200 {
		muts = append(muts, record.Mutation{Attempt: att("w", "k", "a", 1, i+1)})
	}
	commitT(t, s, muts...)
	// Flush the memtable so the data lives in .sst files.
	if err := s.w.waitApplied(); err != nil {
		t.Fatal(err)
	}
	if err := s.forceFlush(); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
}

// deadPID is the PID of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestLockOfAnExitedHolder: a lock whose named holder is no longer running
// is waited for through exitedHolderGrace, whatever the timeout, because it
// is held only by what the holder left behind (a child between fork and
// exec when the holder was killed: the test's own flock stands in for it);
// a running holder still fails the caller at once.
func TestLockOfAnExitedHolder(t *testing.T) {
	tests := []struct {
		name string
		pid  func(t *testing.T) int
		// after the test's flock is taken: what happens to the lock
		// file and the flock while Open waits.
		meanwhile  func(path string, held *os.File)
		wantOpen   bool
		wantExited bool
		max        time.Duration // the longest Open may take
	}{
		{"exited holder, lock released soon", deadPID, func(_ string, held *os.File) {
			time.Sleep(200 * time.Millisecond)
			_ = syscall.Flock(int(held.Fd()), syscall.LOCK_UN)
		}, true, false, exitedHolderGrace},
		{"exited holder, lock never released", deadPID, nil, false, true, exitedHolderGrace + 10*time.Second},
		{"running holder", func(*testing.T) int { return os.Getpid() }, nil, false, false, exitedHolderGrace / 2},
		{"exited holder, a new one writes its details", deadPID, func(path string, _ *os.File) {
			time.Sleep(100 * time.Millisecond)
			_ = os.WriteFile(path, fmt.Appendf(nil, "pid %d\ncommand wf apply\n", os.Getpid()), 0o600)
		}, false, false, exitedHolderGrace / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), ".wf")
			closeT(t, openT(t, dir))
			path := filepath.Join(dir, lockName)
			pid := tt.pid(t)
			if err := os.WriteFile(path, fmt.Appendf(nil, "pid %d\nstarted %s\ncommand wf apply\n", pid, time.Now().Format(time.RFC3339)), 0o600); err != nil {
				t.Fatal(err)
			}
			held, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			// The flock is released by a syscall the race detector
			// cannot see, so the test waits for the goroutine itself
			// before it touches held again (its deferred Close).
			meanwhileDone := make(chan struct{})
			if tt.meanwhile != nil {
				go func() {
					defer close(meanwhileDone)
					tt.meanwhile(path, held)
				}()
			} else {
				close(meanwhileDone)
			}
			start := time.Now()
			s, err := Open(dir, Options{})
			took := time.Since(start)
			<-meanwhileDone
			if took > tt.max {
				t.Errorf("Open took %v, want at most %v", took, tt.max)
			}
			if tt.wantOpen {
				if err != nil {
					t.Fatalf("Open after the lock was released: %v", err)
				}
				closeT(t, s)
				return
			}
			var le *LockedError
			if !errors.As(err, &le) {
				t.Fatalf("Open: %v, want a LockedError", err)
			}
			if le.Exited != tt.wantExited {
				t.Errorf("Exited = %v, want %v (%v)", le.Exited, tt.wantExited, err)
			}
			if tt.wantExited {
				if took < exitedHolderGrace {
					t.Errorf("gave up after %v, before the grace of %v", took, exitedHolderGrace)
				}
				if want := fmt.Sprintf("names PID %d (wf apply, since", pid); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "no longer running") {
					t.Errorf("message %q: want it to say that PID %d is no longer running", err, pid)
				}
			} else if le.PID != os.Getpid() {
				t.Errorf("LockedError names PID %d, want the running holder %d", le.PID, os.Getpid())
			}
		})
	}
}

func TestProcessRunning(t *testing.T) {
	if !processRunning(os.Getpid()) {
		t.Error("this process is not running")
	}
	if pid := deadPID(t); processRunning(pid) {
		t.Errorf("reaped PID %d is running", pid)
	}
	// A zombie: exited, not yet reaped.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatalf("read %s: %v", stat, err)
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child never became a zombie: %s", b)
		}
	}
	if processRunning(cmd.Process.Pid) {
		t.Errorf("zombie PID %d is running", cmd.Process.Pid)
	}
}
