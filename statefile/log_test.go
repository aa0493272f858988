package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// TestEngineLog: a writer says in wf.log who opened the state, what
// opening it took and how it closed; Logf lines go there too; a reader
// writes nothing.
func TestEngineLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	s := openT(t, dir)
	commitT(t, s, record.Mutation{Instance: inst("w", "k")})
	s.Logf(LogInfo, "run started: %d instance", 1)
	closeT(t, s)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ro.Logf(LogError, "a reader must not write this")
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{
		" INFO engine: state opened by wf test (pid ",
		"lock held exclusively: created\n",
		" INFO engine: run started: 1 instance\n",
		" INFO engine: state closed cleanly (checkpoint written), lock released\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("wf.log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "reader") {
		t.Errorf("a reader wrote to wf.log:\n%s", log)
	}
	s = openT(t, dir)
	closeT(t, s)
	b, _ = os.ReadFile(filepath.Join(dir, logName))
	if !strings.Contains(string(b), "1 log record replayed after the checkpoint") && !strings.Contains(string(b), "log records replayed after the checkpoint") {
		t.Errorf("second open not logged with its replay:\n%s", b)
	}
}

// TestEngineLogRotates: past logMaxBytes wf.log becomes wf.log.1 and a
// new wf.log starts; at most two files, each within the bound.
func TestEngineLogRotates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	s := openT(t, dir)
	line := strings.Repeat("x", 1000)
	for range 3 * logMaxBytes / 1000 {
		s.Logf(LogInfo, "%s", line)
	}
	closeT(t, s)
	cur, err := os.Stat(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.Stat(filepath.Join(dir, logOldName))
	if err != nil {
		t.Fatalf("no rotated log: %v", err)
	}
	if cur.Size() > logMaxBytes || old.Size() > logMaxBytes || old.Size() < logMaxBytes/2 {
		t.Errorf("wf.log %d bytes, wf.log.1 %d bytes, bound %d", cur.Size(), old.Size(), logMaxBytes)
	}
	if old.Mode().Perm() != 0o600 || cur.Mode().Perm() != 0o600 {
		t.Errorf("modes %v %v, want 0600", old.Mode(), cur.Mode())
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "wf.log") && e.Name() != logName && e.Name() != logOldName {
			t.Errorf("unexpected log file %s", e.Name())
		}
	}
}
