package statefile

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

// Crash tests: a child process (this test binary, re-executed) writes to a
// store and is killed with SIGKILL; the parent checks what survived.

const (
	childModeEnv = "WF_STATEFILE_TEST_CHILD"
	childDirEnv  = "WF_STATEFILE_TEST_DIR"
	childArgEnv  = "WF_STATEFILE_TEST_ARG"
)

// runChild is called from TestMain when the binary runs as a child.
func runChild(mode string) int {
	dir, arg := os.Getenv(childDirEnv), os.Getenv(childArgEnv)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	opts := Options{Command: "wf test child", segmentSize: 64 << 10}
	switch mode {
	case "commitloop":
		// Writers commit attempts (and spawns) as fast as they can and say
		// which ones were acknowledged, until killed.
		s, err := Open(dir, opts)
		if err != nil {
			say("error: %v", err)
			return 1
		}
		say("ready")
		base, _ := strconv.Atoi(arg)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for n := 1; ; n++ {
					a := att("w", "k", fmt.Sprintf("act%d", w), base, n)
					muts := []record.Mutation{{Attempt: a}}
					if n%7 == 0 {
						muts = append(muts, record.Mutation{Activity: act("w", "k", fmt.Sprintf("act%d", w), n%2 == 0)})
					}
					if err := s.Commit(muts); err != nil {
						say("error: %v", err)
						return
					}
					say("ack %d %d", w, n)
					if n%5 == 0 {
						sp := &record.Spawn{Workflow: "w", Instance: "k", Activity: fmt.Sprintf("act%d", w), Generation: base, Number: n, PID: 100 + n, BootID: "b"}
						if err := s.RecordSpawn(sp); err != nil {
							say("error: %v", err)
							return
						}
						say("spawn %d %d", w, n)
					}
				}
			})
		}
		wg.Wait()
		return 1
	case "killpoint":
		// Sequential commits; the one whose log sequence is arg stops
		// between its log write and its apply to Badger.
		stopAt, _ := strconv.ParseUint(arg, 10, 64)
		opts.afterLogWrite = func(seq uint64) {
			if seq == stopAt {
				say("written %d", seq)
				select {} // wait for SIGKILL
			}
		}
		s, err := Open(dir, opts)
		if err != nil {
			say("error: %v", err)
			return 1
		}
		for n := 1; ; n++ {
			if err := s.Commit([]record.Mutation{{Attempt: att("w", "k", "a", 1, n)}}); err != nil {
				say("error: %v", err)
				return 1
			}
			say("ack %d", n)
		}
	case "script":
		// A fixed history with deletes and re-creations, then wait to be
		// killed: the log after the checkpoint holds all of it.
		s, err := Open(dir, opts)
		if err != nil {
			say("error: %v", err)
			return 1
		}
		if err := scriptedHistory(s); err != nil {
			say("error: %v", err)
			return 1
		}
		say("done")
		select {}
	}
	return 2
}

// scriptedHistory commits instances, activities with and without timers,
// attempts, budgets, deletions and re-creations.
func scriptedHistory(s *Store) error {
	for i := range 30 {
		key := fmt.Sprintf("k%02d", i)
		muts := []record.Mutation{{Instance: inst("w", key)}}
		for j := range 5 {
			name := fmt.Sprintf("a%d", j)
			muts = append(muts, record.Mutation{Activity: act("w", key, name, (i+j)%3 == 0)})
			for n := 1; n <= 3; n++ {
				muts = append(muts, record.Mutation{Attempt: att("w", key, name, 1, n)})
			}
		}
		muts = append(muts, record.Mutation{Budget: &record.Budget{Name: fmt.Sprintf("b%d", i%4), Stamps: []time.Time{t0.Add(time.Duration(i) * time.Second)}}})
		if err := s.Commit(muts); err != nil {
			return err
		}
	}
	for i := 0; i < 30; i += 3 {
		if err := s.DeleteInstance("w", fmt.Sprintf("k%02d", i)); err != nil {
			return err
		}
	}
	for i := 0; i < 30; i += 6 {
		key := fmt.Sprintf("k%02d", i)
		if err := s.Commit([]record.Mutation{{Instance: inst("w", key)}, {Activity: act("w", key, "again", true)}}); err != nil {
			return err
		}
	}
	// Timers cleared and set again.
	for i := 1; i < 30; i += 4 {
		key := fmt.Sprintf("k%02d", i)
		if err := s.Commit([]record.Mutation{{Activity: act("w", key, "a0", false)}, {Activity: act("w", key, "a1", true)}}); err != nil {
			return err
		}
	}
	return nil
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, mode, dir, arg string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childDirEnv+"="+dir, childArgEnv+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1<<16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

// next returns the child's next line, failing on an error line or EOF.
func (c *child) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatal("child exited")
		}
		if strings.HasPrefix(line, "error:") {
			t.Fatalf("child: %s", line)
		}
		return line
	case <-time.After(60 * time.Second):
		t.Fatal("child said nothing for 60s")
		return ""
	}
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		_ = c.cmd.Wait()
	}
}

// TestKill9MidCommitLoopLosesNothing kills a child committing from eight
// goroutines at a random moment, several times over the same state (small
// log segments, so rotations and checkpoints happen too), and checks that
// every acknowledged attempt and spawn is there: through a reader (the log
// laid over the tables) and through a writer (the log replayed).
func TestKill9MidCommitLoopLosesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	type ack struct{ w, n int }
	acked := map[int][]ack{}   // by round (generation)
	spawned := map[int][]ack{} // by round
	for round := 1; round <= 4; round++ {
		c := startChild(t, "commitloop", dir, strconv.Itoa(round))
		if line := c.next(t); line != "ready" {
			t.Fatalf("child: %q", line)
		}
		deadline := time.Now().Add(time.Duration(100+150*round) * time.Millisecond)
		for time.Now().Before(deadline) || len(acked[round]) < 50 {
			line := c.next(t)
			var w, n int
			switch {
			case sscan(line, "ack %d %d", &w, &n):
				acked[round] = append(acked[round], ack{w, n})
			case sscan(line, "spawn %d %d", &w, &n):
				spawned[round] = append(spawned[round], ack{w, n})
			}
		}
		c.kill()
		// Lines the child wrote before it died were acknowledged too.
		for line := range c.lines {
			var w, n int
			switch {
			case sscan(line, "ack %d %d", &w, &n):
				acked[round] = append(acked[round], ack{w, n})
			case sscan(line, "spawn %d %d", &w, &n):
				spawned[round] = append(spawned[round], ack{w, n})
			}
		}
		t.Logf("round %d: %d commits and %d spawns acknowledged", round, len(acked[round]), len(spawned[round]))

		check := func(s *Store, how string) {
			atts, err := s.Attempts("w", "k", "")
			if err != nil {
				t.Fatalf("%s: %v", how, err)
			}
			have := map[string]bool{}
			for _, a := range atts {
				have[fmt.Sprintf("%s/%d/%d", a.Activity, a.Generation, a.Number)] = true
			}
			for r := 1; r <= round; r++ {
				for _, a := range acked[r] {
					if !have[fmt.Sprintf("act%d/%d/%d", a.w, r, a.n)] {
						t.Fatalf("%s after round %d: acknowledged attempt act%d gen %d #%d lost", how, round, a.w, r, a.n)
					}
				}
			}
			sp, err := s.Spawns("w", "k")
			if err != nil {
				t.Fatalf("%s: %v", how, err)
			}
			// The newest acknowledged spawn of each activity in this round
			// must be there (later ones may be too).
			last := map[int]int{}
			for _, a := range spawned[round] {
				last[a.w] = max(last[a.w], a.n)
			}
			for w, n := range last {
				got := sp[fmt.Sprintf("act%d", w)]
				if got == nil || got.Generation != round || got.Number < n {
					t.Fatalf("%s after round %d: spawn of act%d #%d lost (have %+v)", how, round, w, n, got)
				}
			}
		}
		ro, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only open after kill -9: %v", err)
		}
		check(ro, "reader")
		closeT(t, ro)
		if round == 4 {
			s := openT(t, dir)
			check(s, "writer")
			closeT(t, s)
		}
	}
}

func sscan(line, format string, args ...any) bool {
	n, err := fmt.Sscanf(line, format, args...)
	return err == nil && n == len(args)
}

// TestKill9BetweenLogAndApply stops a child after a record is in the log
// and before Badger has it, and kills it there: the record is not lost.
func TestKill9BetweenLogAndApply(t *testing.T) {
	for _, stopAt := range []uint64{2, 40} {
		t.Run(fmt.Sprint("seq ", stopAt), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".wf")
			c := startChild(t, "killpoint", dir, fmt.Sprint(stopAt))
			acks := 0
			for {
				line := c.next(t)
				if strings.HasPrefix(line, "written") {
					break
				}
				acks++
			}
			c.kill()
			// Sequence 1 is the new state's schema record; commit n is
			// sequence n+1, so the stopped one is attempt stopAt-1.
			want := int(stopAt) - 1
			if acks != want-1 {
				t.Fatalf("%d commits acknowledged before the stop, want %d", acks, want-1)
			}
			for _, ro := range []bool{true, false} {
				s, err := Open(dir, Options{ReadOnly: ro})
				if err != nil {
					t.Fatal(err)
				}
				atts, err := s.Attempts("w", "k", "a")
				if err != nil {
					t.Fatal(err)
				}
				if len(atts) != want || atts[len(atts)-1].Number != want {
					t.Fatalf("read-only %v: %d attempts, want %d (the one in the log but not in the database included)", ro, len(atts), want)
				}
				closeT(t, s)
			}
		})
	}
}

// fileState is everything a read-only open must leave alone.
type fileState struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	sum   string // content hash, or the link target
}

func snapshotTree(t *testing.T, root string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st := fileState{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			st.sum, _ = os.Readlink(path)
		case fi.Mode().IsRegular():
			sum, err := hashSparse(path, fi.Size())
			if err != nil {
				return err
			}
			st.sum = sum
		case fi.IsDir():
			names, err := os.ReadDir(path)
			if err != nil {
				return err
			}
			var list []string
			for _, n := range names {
				list = append(list, n.Name())
			}
			sort.Strings(list)
			st.sum = strings.Join(list, "\x00")
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = st
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// hashSparse hashes a file's data regions with their offsets, skipping
// holes (which read as zeros and are hashed as such by their absence).
func hashSparse(path string, size int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	const seekData, seekHole = 3, 4
	h := sha256.New()
	fd := int(f.Fd())
	// Hash every non-zero 4 KiB block with its offset: the same content
	// hashes the same whatever the file system's extent layout.
	const block = 4096
	buf := make([]byte, block)
	for off := int64(0); off < size; {
		data, err := syscall.Seek(fd, off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			return "", err
		}
		hole, err := syscall.Seek(fd, data, seekHole)
		if err != nil {
			return "", err
		}
		for p := data / block * block; p < hole; p += block {
			n, err := f.ReadAt(buf, p)
			if err != nil && err != io.EOF {
				return "", err
			}
			if n > 0 && !allZero(buf[:n]) {
				fmt.Fprintf(h, "@%d:", p)
				h.Write(buf[:n])
			}
		}
		off = max(hole, off+1)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func diffTrees(before, after map[string]fileState) []string {
	var d []string
	for k, b := range before {
		a, ok := after[k]
		switch {
		case !ok:
			d = append(d, k+": removed")
		case a != b:
			d = append(d, fmt.Sprintf("%s: %+v -> %+v", k, b, a))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			d = append(d, k+": created")
		}
	}
	sort.Strings(d)
	return d
}

// killedState leaves a state whose writer was killed with SIGKILL after a
// scripted history: memtable logs, a log with records after the
// checkpoint.
func killedState(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".wf")
	c := startChild(t, "script", dir, "")
	if line := c.next(t); line != "done" {
		t.Fatalf("child: %q", line)
	}
	c.kill()
	return dir
}

// TestReadOnlyChangesNothing opens a crashed state read-only, reads all of
// it, checks it, and requires every file (content, size, mode, mtime) and
// every directory listing to be exactly as before.
func TestReadOnlyChangesNothing(t *testing.T) {
	dir := killedState(t)
	mems, _ := filepath.Glob(filepath.Join(dir, "db", "*.mem"))
	if len(mems) == 0 {
		t.Fatal("the killed writer left no memtable log: the test would prove little")
	}
	before := snapshotTree(t, dir)
	time.Sleep(20 * time.Millisecond) // an mtime change would show
	for range 2 {
		s, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.ov == nil || s.ov.len() == 0 {
			t.Fatal("the reader found no log records after the checkpoint")
		}
		insts, err := s.Instances()
		if err != nil || len(insts) == 0 {
			t.Fatalf("%d instances, %v", len(insts), err)
		}
		for _, in := range insts {
			if _, err := s.Activities(in.Workflow, in.Key); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Attempts(in.Workflow, in.Key, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PendingTimers(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Budgets(); err != nil {
			t.Fatal(err)
		}
		closeT(t, s)
		if _, err := Check(dir, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := diffTrees(before, snapshotTree(t, dir)); len(d) > 0 {
		t.Fatalf("read-only use changed the state directory:\n%s", strings.Join(d, "\n"))
	}
}

// storeDump renders everything a Store returns, for comparisons.
func storeDump(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	insts, err := s.Instances()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		acts, err := s.Activities(in.Workflow, in.Key)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := s.Attempts(in.Workflow, in.Key, "")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s\n%s\n%s\n", in.Address(), dump(in), dump(acts), dump(atts))
	}
	timers, err := s.PendingTimers()
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := s.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "timers %s\nbudgets %s\n", dump(timers), dump(budgets))
	return b.String()
}

// TestReaderOverlayMatchesRecovery: what a reader shows of a crashed state
// (tables plus the log in memory, deletes and prefix deletes included)
// equals what a writer shows after replaying the log into Badger, and what
// the same history shows in a store that never crashed.
func TestReaderOverlayMatchesRecovery(t *testing.T) {
	dir := killedState(t)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	fromReader := storeDump(t, ro)
	closeT(t, ro)

	ref := openT(t, t.TempDir())
	if err := scriptedHistory(ref); err != nil {
		t.Fatal(err)
	}
	want := storeDump(t, ref)
	closeT(t, ref)

	s := openT(t, dir)
	fromWriter := storeDump(t, s)
	closeT(t, s)
	if fromReader != want {
		t.Errorf("reader of the crashed state differs from the reference")
	}
	if fromWriter != want {
		t.Errorf("writer after recovery differs from the reference")
	}
	if !strings.Contains(want, "again") || !strings.Contains(want, "w/k00 ") {
		t.Fatalf("reference history lacks its re-creations:\n%.2000s", want)
	}
}
