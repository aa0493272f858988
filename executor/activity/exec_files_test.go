package activity

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The attempt files an exec attempt gets ($WF_OUTPUT_FILE, $WF_ERROR_FILE,
// $WF_HEARTBEAT_FILE): made per attempt, removed after it and at Close.

// attemptDirs lists the Runner directories under tmp and their entries.
func attemptDirs(t *testing.T, tmp string) map[string][]string {
	t.Helper()
	des, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string][]string{}
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), "wf-attempts-") {
			continue
		}
		sub, err := os.ReadDir(filepath.Join(tmp, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range sub {
			names = append(names, s.Name())
		}
		dirs[de.Name()] = names
	}
	return dirs
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdRunner starts an attempt that runs until the returned release
// function is called, so that the Runner's directory stays in use; release
// returns that attempt's result.
func holdRunner(t *testing.T, r *Runner, dir string) (release func() Result) {
	t.Helper()
	started, stop := filepath.Join(dir, "hold.started"), filepath.Join(dir, "hold.stop")
	resc := make(chan Result, 1)
	go func() {
		resc <- r.Run(context.Background(), scriptReq(dir, `touch "`+started+`"; while [ ! -e "`+stop+`" ]; do sleep 0.01; done; echo '{"held":true}' > "$WF_OUTPUT_FILE"`))
	}()
	waitFile(t, started)
	return func() Result {
		if err := os.WriteFile(stop, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return <-resc
	}
}

// No attempt leaves a file behind, whatever it wrote and however it ended:
// the files are gone as soon as its Run returns, without touching those of
// an attempt still running, and Close removes the directory.
func TestExecAttemptFilesCleanup(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		wantType string // "" for success
	}{
		{name: "nothing written", script: `true`},
		{name: "output written", script: `echo '{"a":1}' > "$WF_OUTPUT_FILE"`},
		{name: "error file written on success", script: `echo '{"type":"T"}' > "$WF_ERROR_FILE"`},
		{name: "both written on failure", script: `echo 1 > "$WF_OUTPUT_FILE"; echo '{"type":"T"}' > "$WF_ERROR_FILE"; exit 1`, wantType: "T"},
		{name: "invalid output", script: `echo '{' > "$WF_OUTPUT_FILE"`, wantType: TypeOutputInvalidJSON},
		{name: "output too large", script: `head -c 5000 /dev/zero > "$WF_OUTPUT_FILE"`, wantType: TypeOutputTooLarge},
		{name: "directories instead of files", script: `mkdir -p "$WF_OUTPUT_FILE/x" "$WF_ERROR_FILE/y"; exit 2`, wantType: "exit:2"},
		{name: "killed", script: `echo '{"type":"T"}' > "$WF_ERROR_FILE"; echo 1 > "$WF_OUTPUT_FILE"; kill -KILL $$`, wantType: "signal:SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp, dir := t.TempDir(), t.TempDir()
			r := newTestRunner(t, Options{TempDir: tmp, MaxOutput: 1000})
			release := holdRunner(t, r, dir)
			res := r.Run(context.Background(), scriptReq(dir, tt.script))
			switch {
			case tt.wantType == "" && res.Failure != nil:
				t.Fatalf("failure %+v", *res.Failure)
			case tt.wantType != "" && (res.Failure == nil || res.Failure.Type != tt.wantType):
				t.Fatalf("failure = %+v, want %s", res.Failure, tt.wantType)
			}
			dirs := attemptDirs(t, tmp)
			if len(dirs) != 1 {
				t.Fatalf("want one runner directory under %s, got %v", tmp, dirs)
			}
			for d, entries := range dirs {
				if len(entries) != 0 {
					t.Errorf("%s holds %v after the attempt", d, entries)
				}
			}
			// The held attempt's own files still work after the other
			// attempt ended.
			held := release()
			if held.Failure != nil {
				t.Fatalf("held attempt: %+v", *held.Failure)
			}
			if m := decodeOutputs(t, held.Outputs); m["result"] == nil {
				t.Errorf("held attempt lost its output file: %s", held.Outputs)
			}
			for d, entries := range attemptDirs(t, tmp) {
				if len(entries) != 0 {
					t.Errorf("%s holds %v after both attempts", d, entries)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if dirs := attemptDirs(t, tmp); len(dirs) != 0 {
				t.Errorf("left after Close: %v", dirs)
			}
		})
	}
}

// What one attempt wrote is never seen by the next, even when the activity
// is the same and the first attempt's process wrote its files without
// reading them back.
func TestExecAttemptFilesDoNotLeak(t *testing.T) {
	dir := t.TempDir()
	r := newTestRunner(t, Options{})
	for _, hold := range []bool{false, true} {
		var release func() Result
		if hold {
			// The same with the directory kept between the two attempts.
			release = holdRunner(t, r, dir)
		}
		// Attempt 1 succeeds with a result and an (ignored) error file.
		first := r.Run(context.Background(), scriptReq(dir, `echo '{"n":1}' > "$WF_OUTPUT_FILE"; echo '{"type":"Old"}' > "$WF_ERROR_FILE"`))
		if first.Failure != nil {
			t.Fatalf("first: %+v", *first.Failure)
		}
		if m, _ := decodeOutputs(t, first.Outputs)["result"].(map[string]any); m["n"] != 1.0 {
			t.Fatalf("first outputs = %s", first.Outputs)
		}
		// Attempt 2 writes nothing and fails: no result, no typed error.
		second := r.Run(context.Background(), scriptReq(dir, `test ! -e "$WF_OUTPUT_FILE" && test ! -e "$WF_ERROR_FILE" && exit 3; exit 4`))
		if second.Failure == nil || second.Failure.Type != "exit:3" {
			t.Fatalf("hold %v: second failure = %+v, want exit:3 (fresh files, nothing inherited)", hold, second.Failure)
		}
		if m := decodeOutputs(t, second.Outputs); m["result"] != nil {
			t.Errorf("hold %v: second result = %v, want null", hold, m["result"])
		}
		if release != nil {
			release()
			_ = os.Remove(filepath.Join(dir, "hold.started"))
			_ = os.Remove(filepath.Join(dir, "hold.stop"))
		}
	}
}

// Close removes a file that a background process wrote after its attempt
// ended, and the Runner keeps working after Close.
func TestExecCloseRemovesLateFiles(t *testing.T) {
	tmp, dir := t.TempDir(), t.TempDir()
	done := filepath.Join(dir, "late.done")
	r := newTestRunner(t, Options{TempDir: tmp, BaseEnv: append(testEnv(), "DONE="+done), WaitDelay: 100 * time.Millisecond})
	res := r.Run(context.Background(), scriptReq(dir, `(sleep 0.3; echo late > "$WF_OUTPUT_FILE"; touch "$DONE") >/dev/null 2>&1 &`))
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	waitFile(t, done)
	var late int
	for _, entries := range attemptDirs(t, tmp) {
		late += len(entries)
	}
	if late != 1 {
		t.Fatalf("want the late output file in the runner directory, found %d files", late)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if dirs := attemptDirs(t, tmp); len(dirs) != 0 {
		t.Errorf("left after Close: %v", dirs)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// Usable again: a new directory, files that work.
	res = r.Run(context.Background(), scriptReq(dir, `echo '{"again":true}' > "$WF_OUTPUT_FILE"`))
	if res.Failure != nil {
		t.Fatalf("after Close: %+v", *res.Failure)
	}
	if m := decodeOutputs(t, res.Outputs); m["result"] == nil {
		t.Errorf("after Close: result = null, outputs %s", res.Outputs)
	}
}

// Close waits for attempts in flight instead of removing their directory
// under them.
func TestExecCloseWaitsForAttempts(t *testing.T) {
	tmp, dir := t.TempDir(), t.TempDir()
	r := newTestRunner(t, Options{TempDir: tmp})
	release := holdRunner(t, r, dir)
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an attempt was running", err)
	case <-time.After(100 * time.Millisecond):
	}
	held := release()
	if held.Failure != nil {
		t.Fatalf("failure %+v", *held.Failure)
	}
	if m := decodeOutputs(t, held.Outputs); m["result"] == nil {
		t.Errorf("result = null: the output file was lost; outputs %s", held.Outputs)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if dirs := attemptDirs(t, tmp); len(dirs) != 0 {
		t.Errorf("left after Close: %v", dirs)
	}
}
