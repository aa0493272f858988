package statefile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/wf-engine/wf/statefile/record"
)

const legacyID = "00112233445566778899aabbccddeeff"

// legacyState writes a state the way the previous wf did (schema 1: Badger
// only, synced writes, no log). With crashed set it returns a copy taken
// while Badger was still open: what kill -9 left, memtable logs holding
// the data. withID false: a state from before identities.
func legacyState(t *testing.T, crashed, withID bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".wf")
	if err := os.MkdirAll(filepath.Join(dir, dbName), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, gitignoreName), "*\n")
	writeFile(t, filepath.Join(dir, lockName), "")
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, dbName)).WithLogger(nil).WithSyncWrites(true).
		WithMemTableSize(16 << 20).WithValueThreshold(64 << 10).WithCompression(0))
	if err != nil {
		t.Fatal(err)
	}
	set := func(k []byte, v any) {
		var b []byte
		switch v := v.(type) {
		case string:
			b = []byte(v)
		default:
			// The previous wf wrote every record as JSON.
			if b, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(k, b) }); err != nil {
			t.Fatal(err)
		}
	}
	set(keySchema, "1")
	if withID {
		set(keyID, legacyID)
	}
	set(instanceKey("w", "k"), inst("w", "k"))
	a := act("w", "k", "charge", true)
	set(activityKey("w", "k", "charge"), a)
	set(timerKey("w", "k", "charge"), "")
	set(attemptKey("w", "k", "charge", 1, 1), att("w", "k", "charge", 1, 1))
	if crashed {
		img := filepath.Join(t.TempDir(), ".wf")
		copyTree(t, dir, img)
		db.Close()
		return img
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLegacyStateMigrates(t *testing.T) {
	for _, tc := range []struct {
		name            string
		crashed, withID bool
	}{{"clean", false, true}, {"crashed", true, true}, {"no identity", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := legacyState(t, tc.crashed, tc.withID)
			if tc.crashed {
				if mems, _ := filepath.Glob(filepath.Join(dir, dbName, "*.mem")); len(mems) == 0 {
					t.Fatal("the crash image has no memtable log")
				}
			}
			// A reader reads it as it is and changes nothing.
			before := snapshotTree(t, dir)
			ro, err := Open(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			want := storeDump(t, ro)
			if !strings.Contains(want, "charge") {
				t.Fatalf("reader sees no data:\n%s", want)
			}
			if id := ro.ID(); tc.withID && id != legacyID || !tc.withID && id != "" {
				t.Fatalf("reader's identity %q", id)
			}
			closeT(t, ro)
			if d := diffTrees(before, snapshotTree(t, dir)); len(d) > 0 {
				t.Fatalf("reading a legacy state changed it: %v", d)
			}
			rep, err := Check(dir, Options{})
			if err != nil || rep.Schema != 1 {
				t.Fatalf("check: %+v %v", rep, err)
			}

			// A writer migrates: log, checkpoint, identity kept (or made).
			s := openT(t, dir)
			if got := storeDump(t, s); got != want {
				t.Fatalf("after migration:\n%s\nwant\n%s", got, want)
			}
			id := s.ID()
			if tc.withID && id != legacyID || !validID(id) {
				t.Fatalf("identity after migration %q", id)
			}
			commitT(t, s, record.Mutation{Attempt: att("w", "k", "charge", 1, 2)})
			closeT(t, s)
			for _, name := range []string{checkpointName, walName, "db/MANIFEST"} {
				if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
					t.Fatalf("%s after migration: %v", name, err)
				}
			}
			rep, err = Check(dir, Options{})
			if err != nil || rep.Schema != 2 || rep.Identity != id || rep.Attempts != 2 {
				t.Fatalf("check after migration: %+v %v", rep, err)
			}
			s = openT(t, dir)
			if s.ID() != id {
				t.Fatalf("identity changed on reopen: %s -> %s", id, s.ID())
			}
			closeT(t, s)
		})
	}
}

// TestSchema2JSONActivitiesRead: a schema-2 state (activities stored as
// JSON, as the wf before binary activities wrote them) opens, reads the
// same records, is marked schema 3, and an activity rewritten since reads
// back too.
func TestSchema2JSONActivitiesRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".wf")
	s := openT(t, dir)
	old := act("w", "k", "charge", true)
	js, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	commitT(t, s, record.Mutation{Instance: inst("w", "k")}, record.Mutation{Activity: act("w", "k", "ship", false)})
	// Behind the log's back, once the commit is applied: what the older wf
	// left in the database.
	if err := s.w.waitApplied(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keySchema, []byte("2")); err != nil {
			return err
		}
		if err := txn.Set(timerKey("w", "k", "charge"), []byte{}); err != nil {
			return err
		}
		return txn.Set(activityKey("w", "k", "charge"), js)
	}); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)

	s = openT(t, dir)
	acts, err := s.Activities("w", "k")
	if err != nil {
		t.Fatal(err)
	}
	var want record.Activity
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	if got := acts["charge"]; got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("JSON activity read back as %+v, want %+v", got, want)
	}
	if timers, err := s.PendingTimers(); err != nil || len(timers) != 1 {
		t.Fatalf("PendingTimers: %d, %v", len(timers), err)
	}
	schema, _, err := func() ([]byte, bool, error) {
		snap := s.snapshot()
		defer snap.discard()
		return snap.get(keySchema)
	}()
	if err != nil || string(schema) != fmt.Sprint(record.SchemaVersion) {
		t.Fatalf("schema after open: %q, %v; want %d", schema, err, record.SchemaVersion)
	}
	want.Attempts++
	commitT(t, s, record.Mutation{Activity: &want})
	closeT(t, s)
	s = openT(t, dir)
	defer closeT(t, s)
	acts, err = s.Activities("w", "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := acts["charge"]; got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("rewritten activity read back as %+v, want %+v", got, want)
	}
}
