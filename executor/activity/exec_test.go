package activity

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/wf-engine/wf/config"
)

// testEnv is the base environment of test runners: just enough to find
// sh and coreutils, so tests never depend on the developer's environment.
func testEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "WF_TEST_BASE=base"}
}

func newTestRunner(t *testing.T, opts Options) *Runner {
	t.Helper()
	if opts.BaseEnv == nil {
		opts.BaseEnv = testEnv()
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	r := NewRunner(opts)
	// Every test checks that Close leaves nothing behind.
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close runner: %v", err)
		}
		if dirs := attemptDirs(t, opts.TempDir); len(dirs) != 0 {
			t.Errorf("left in %s after Close: %v", opts.TempDir, dirs)
		}
	})
	return r
}

// writeScript writes an executable /bin/sh script and returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func scriptReq(dir, script string) Request {
	return Request{
		Workflow: "order", Instance: "order-1", Activity: "charge", Attempt: 1,
		IdempotencyKey: "wf1-test",
		Spec:           &config.Resolved{Exec: &config.ExecSpec{Script: script, Dir: dir}},
	}
}

func decodeOutputs(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("outputs %s: %v", raw, err)
	}
	return m
}

func TestExecFailures(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "notexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "badinterp"), []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name         string
		spec         config.ExecSpec
		maxOutput    int64
		wantType     string
		wantMsg      []string // substrings of the message
		nonRetryable bool
		retryAfter   time.Duration // checked when hasRetryAfter
		hasRA        bool
		exitCode     float64
	}{
		{name: "exit status", spec: config.ExecSpec{Script: "echo working; echo first >&2; echo card declined >&2; exit 3"},
			wantType: "exit:3", wantMsg: []string{"first", "card declined"}, exitCode: 3},
		{name: "exit status no stderr", spec: config.ExecSpec{Script: "exit 7"},
			wantType: "exit:7", wantMsg: []string{"exit status 7"}, exitCode: 7},
		{name: "absolute path missing", spec: config.ExecSpec{Command: []string{"/nonexistent/bin/charge"}},
			wantType: TypeExecNotFound, wantMsg: []string{"/nonexistent/bin/charge"}, exitCode: -1},
		{name: "bare name not in PATH", spec: config.ExecSpec{Command: []string{"wf-no-such-command-xyz"}},
			wantType: TypeExecNotFound, wantMsg: []string{"not found in PATH"}, exitCode: -1},
		{name: "not executable", spec: config.ExecSpec{Command: []string{notExec}},
			wantType: TypeExecNotFound, wantMsg: []string{"not executable"}, exitCode: -1},
		{name: "relative not executable", spec: config.ExecSpec{Command: []string{"./notexec"}},
			wantType: TypeExecNotFound, exitCode: -1},
		{name: "bad interpreter", spec: config.ExecSpec{Command: []string{"./badinterp"}},
			wantType: TypeExecNotFound, exitCode: -1},
		{name: "directory as command", spec: config.ExecSpec{Command: []string{"/"}},
			wantType: TypeExecNotFound, wantMsg: []string{"directory"}, exitCode: -1},
		{name: "signal term", spec: config.ExecSpec{Script: "echo dying >&2; kill -TERM $$"},
			wantType: "signal:SIGTERM", wantMsg: []string{"SIGTERM", "dying"}, exitCode: -1},
		{name: "signal kill", spec: config.ExecSpec{Script: "kill -KILL $$"},
			wantType: "signal:SIGKILL", exitCode: -1},
		{name: "error file", spec: config.ExecSpec{Script: `printf '{"type":"CardDeclined","message":"no funds","non_retryable":true,"retry_after":"5s"}' > "$WF_ERROR_FILE"; exit 1`},
			wantType: "CardDeclined", wantMsg: []string{"no funds"}, nonRetryable: true, hasRA: true, retryAfter: 5 * time.Second, exitCode: 1},
		{name: "error file retryable with numeric retry_after", spec: config.ExecSpec{Script: `printf '{"type":"RateLimited","retry_after":2.5}' > "$WF_ERROR_FILE"; exit 1`},
			wantType: "RateLimited", hasRA: true, retryAfter: 2500 * time.Millisecond, exitCode: 1},
		{name: "error file without retry_after", spec: config.ExecSpec{Script: `echo '{"type":"Fraud","message":"flagged"}' > "$WF_ERROR_FILE"; exit 4`},
			wantType: "Fraud", wantMsg: []string{"flagged"}, exitCode: 4},
		{name: "error file malformed json", spec: config.ExecSpec{Script: `echo nope > "$WF_ERROR_FILE"; echo oops >&2; exit 2`},
			wantType: "exit:2", wantMsg: []string{"oops", "malformed $WF_ERROR_FILE"}, exitCode: 2},
		{name: "error file without type", spec: config.ExecSpec{Script: `echo '{"message":"x"}' > "$WF_ERROR_FILE"; exit 2`},
			wantType: "exit:2", wantMsg: []string{"malformed", `"type"`}, exitCode: 2},
		{name: "error file bad retry_after", spec: config.ExecSpec{Script: `echo '{"type":"T","retry_after":"soon"}' > "$WF_ERROR_FILE"; exit 2`},
			wantType: "exit:2", wantMsg: []string{"malformed", "retry_after"}, exitCode: 2},
		{name: "error file negative retry_after", spec: config.ExecSpec{Script: `echo '{"type":"T","retry_after":"-1s"}' > "$WF_ERROR_FILE"; exit 2`},
			wantType: "exit:2", wantMsg: []string{"negative"}, exitCode: 2},
		{name: "error file ignored when killed", spec: config.ExecSpec{Script: `echo '{"type":"T"}' > "$WF_ERROR_FILE"; kill -KILL $$`},
			wantType: "signal:SIGKILL", exitCode: -1},
		{name: "output file invalid json", spec: config.ExecSpec{Script: `echo '{not json' > "$WF_OUTPUT_FILE"`},
			wantType: TypeOutputInvalidJSON, wantMsg: []string{"$WF_OUTPUT_FILE"}, nonRetryable: true, exitCode: 0},
		{name: "output file too large", maxOutput: 64, spec: config.ExecSpec{Script: `printf '"%0100d"' 0 > "$WF_OUTPUT_FILE"`},
			wantType: TypeOutputTooLarge, nonRetryable: true, exitCode: 0},
		{name: "missing working directory", spec: config.ExecSpec{Command: []string{"true"}, Dir: filepath.Join(dir, "missing")},
			wantType: TypeExecStart, wantMsg: []string{"working directory"}, exitCode: -1},
		{name: "no command", spec: config.ExecSpec{},
			wantType: TypeInvalidSpec, nonRetryable: true, exitCode: -1},
		{name: "command and script", spec: config.ExecSpec{Command: []string{"true"}, Script: "true"},
			wantType: TypeInvalidSpec, nonRetryable: true, exitCode: -1},
		{name: "empty program", spec: config.ExecSpec{Command: []string{""}},
			wantType: TypeInvalidSpec, nonRetryable: true, exitCode: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{MaxOutput: tt.maxOutput})
			spec := tt.spec
			if spec.Dir == "" {
				spec.Dir = dir
			}
			req := scriptReq(dir, "")
			req.Spec.Exec = &spec
			res := r.Run(context.Background(), req)
			if res.Failure == nil {
				t.Fatalf("want failure %s, got success with outputs %s", tt.wantType, res.Outputs)
			}
			f := res.Failure
			if f.Type != tt.wantType {
				t.Fatalf("type = %q (message %q), want %q", f.Type, f.Message, tt.wantType)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(f.Message, s) {
					t.Errorf("message %q does not contain %q", f.Message, s)
				}
			}
			if f.NonRetryable != tt.nonRetryable {
				t.Errorf("NonRetryable = %v, want %v", f.NonRetryable, tt.nonRetryable)
			}
			if f.HasRetryAfter != tt.hasRA || f.RetryAfter != tt.retryAfter {
				t.Errorf("retry after = %v/%v, want %v/%v", f.RetryAfter, f.HasRetryAfter, tt.retryAfter, tt.hasRA)
			}
			out := decodeOutputs(t, res.Outputs)
			if out["exit_code"] != tt.exitCode {
				t.Errorf("exit_code = %v, want %v", out["exit_code"], tt.exitCode)
			}
			for _, k := range []string{"stdout", "stderr", "result"} {
				if _, ok := out[k]; !ok {
					t.Errorf("outputs %s lack %q", res.Outputs, k)
				}
			}
		})
	}
}

func TestExecOutputs(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(dir, "bin"), "tool", `echo "{\"cwd\": \"$(pwd)\", \"arg\": \"$1\"}"`)

	tests := []struct {
		name       string
		spec       config.ExecSpec
		wantStdout string
		wantResult string // compact JSON; "null" for none
	}{
		{name: "output file wins over stdout", spec: config.ExecSpec{Script: `echo '{"from":"stdout"}'; echo '{"id": 7, "ok": true}' > "$WF_OUTPUT_FILE"`},
			wantStdout: "{\"from\":\"stdout\"}\n", wantResult: `{"id":7,"ok":true}`},
		{name: "stdout json", spec: config.ExecSpec{Script: `echo '  [1, 2, {"a": "b"}]  '`},
			wantStdout: "  [1, 2, {\"a\": \"b\"}]  \n", wantResult: `[1,2,{"a":"b"}]`},
		{name: "stdout scalar json", spec: config.ExecSpec{Script: `echo 42`},
			wantStdout: "42\n", wantResult: `42`},
		{name: "plain stdout", spec: config.ExecSpec{Script: `echo hello world`},
			wantStdout: "hello world\n", wantResult: `null`},
		{name: "empty stdout", spec: config.ExecSpec{Script: `true`},
			wantStdout: "", wantResult: `null`},
		{name: "whitespace-only output file falls back to stdout", spec: config.ExecSpec{Script: `echo '{"s":1}'; echo '  ' > "$WF_OUTPUT_FILE"`},
			wantStdout: "{\"s\":1}\n", wantResult: `{"s":1}`},
		{name: "output file removed", spec: config.ExecSpec{Script: `rm "$WF_OUTPUT_FILE"; echo plain`},
			wantStdout: "plain\n", wantResult: `null`},
		{name: "argv without shell", spec: config.ExecSpec{Command: []string{"./bin/tool", "a b;$HOME"}},
			wantStdout: "{\"cwd\": \"" + dir + "\", \"arg\": \"a b;$HOME\"}\n", wantResult: `{"cwd":"` + dir + `","arg":"a b;$HOME"}`},
		{name: "bare name from PATH", spec: config.ExecSpec{Command: []string{"printf", "%s", `{"x":1}`}},
			wantStdout: `{"x":1}`, wantResult: `{"x":1}`},
		{name: "error file ignored on exit 0", spec: config.ExecSpec{Script: `echo '{"type":"T"}' > "$WF_ERROR_FILE"; echo ok`},
			wantStdout: "ok\n", wantResult: `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{})
			spec := tt.spec
			spec.Dir = dir
			req := scriptReq(dir, "")
			req.Spec.Exec = &spec
			res := r.Run(context.Background(), req)
			if res.Failure != nil {
				t.Fatalf("failure %+v", *res.Failure)
			}
			var out struct {
				Stdout   string          `json:"stdout"`
				Stderr   string          `json:"stderr"`
				ExitCode *int            `json:"exit_code"`
				Result   json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(res.Outputs, &out); err != nil {
				t.Fatal(err)
			}
			if out.Stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", out.Stdout, tt.wantStdout)
			}
			if out.ExitCode == nil || *out.ExitCode != 0 {
				t.Errorf("exit_code = %v, want 0", out.ExitCode)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, out.Result); err != nil {
				t.Fatal(err)
			}
			if compact.String() != tt.wantResult {
				t.Errorf("result = %s, want %s", compact.String(), tt.wantResult)
			}
		})
	}
}

func TestExecFailureKeepsOutputs(t *testing.T) {
	dir := t.TempDir()
	r := newTestRunner(t, Options{})
	res := r.Run(context.Background(), scriptReq(dir, `echo partial; echo '{"step": 2}' > "$WF_OUTPUT_FILE"; echo bad >&2; exit 5`))
	if res.Failure == nil || res.Failure.Type != "exit:5" {
		t.Fatalf("failure = %+v, want exit:5", res.Failure)
	}
	out := decodeOutputs(t, res.Outputs)
	if out["stdout"] != "partial\n" || out["stderr"] != "bad\n" || out["exit_code"] != 5.0 {
		t.Errorf("outputs = %s", res.Outputs)
	}
	if m, ok := out["result"].(map[string]any); !ok || m["step"] != 2.0 {
		t.Errorf("result = %v, want {step: 2}", out["result"])
	}
}

func TestExecEnv(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("WF_TEST_LEAK", "leaked")
	r := newTestRunner(t, Options{TempDir: tmp})
	req := Request{
		Workflow: "order", Instance: "order-1001", Activity: "charge_card", Attempt: 3,
		IdempotencyKey: "wf1-0123456789abcdef",
		Spec: &config.Resolved{Exec: &config.ExecSpec{
			// The script records whether its files are fresh (nothing there
			// yet) and can be written while it runs.
			Script: `test ! -e "$WF_OUTPUT_FILE" && test ! -e "$WF_ERROR_FILE" && test -d "$(dirname "$WF_OUTPUT_FILE")" && test -w "$(dirname "$WF_OUTPUT_FILE")" && echo FILES=fresh; env`,
			Env:    map[string]string{"API": "http://127.0.0.1:1/x y", "WF_ATTEMPT": "99", "WF_TEST_BASE": "overridden"},
			Dir:    dir,
		}},
	}
	res := r.Run(context.Background(), req)
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	out := decodeOutputs(t, res.Outputs)
	env := parseEnv(out["stdout"].(string))
	want := map[string]string{
		"FILES":              "fresh",
		"WF_IDEMPOTENCY_KEY": "wf1-0123456789abcdef",
		"WF_ATTEMPT":         "3", // the activity cannot override WF_*
		"WF_WORKFLOW":        "order",
		"WF_INSTANCE":        "order-1001",
		"WF_ACTIVITY":        "charge_card",
		"API":                "http://127.0.0.1:1/x y",
		"WF_TEST_BASE":       "overridden", // spec env overrides the base
		"PWD":                dir,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["WF_TEST_LEAK"]; ok {
		t.Error("process environment leaked although BaseEnv was injected")
	}
	for _, k := range []string{"WF_OUTPUT_FILE", "WF_ERROR_FILE"} {
		if p := env[k]; !strings.HasPrefix(p, tmp+string(filepath.Separator)) {
			t.Errorf("%s = %q, want a file under %s", k, p, tmp)
		}
	}
	if env["WF_OUTPUT_FILE"] == env["WF_ERROR_FILE"] {
		t.Error("output and error files are the same file")
	}

	// Each attempt gets its own paths.
	res2 := r.Run(context.Background(), req)
	env2 := parseEnv(decodeOutputs(t, res2.Outputs)["stdout"].(string))
	if env2["FILES"] != "fresh" {
		t.Errorf("second attempt did not get fresh files: %v", env2)
	}
	for _, k := range []string{"WF_OUTPUT_FILE", "WF_ERROR_FILE"} {
		if env2[k] == env[k] {
			t.Errorf("second attempt reused the first attempt's %s %s", k, env[k])
		}
	}
}

// parseEnv parses the output of env(1).
func parseEnv(s string) map[string]string {
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

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

// Resolved program paths are cached, but a program that disappears or moves
// to another PATH entry is found again.
func TestExecPathCache(t *testing.T) {
	dir := t.TempDir()
	bin1, bin2 := filepath.Join(dir, "bin1"), filepath.Join(dir, "bin2")
	for _, d := range []string{bin1, bin2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := newTestRunner(t, Options{BaseEnv: []string{"PATH=" + bin1 + ":" + bin2 + ":" + os.Getenv("PATH")}})
	req := scriptReq(dir, "")
	req.Spec.Exec.Script = ""
	req.Spec.Exec.Command = []string{"wf-cache-tool"}
	run := func() (string, *Failure) {
		res := r.Run(context.Background(), req)
		out, _ := decodeOutputs(t, res.Outputs)["stdout"].(string)
		return out, res.Failure
	}

	writeScript(t, bin2, "wf-cache-tool", "echo two")
	if out, f := run(); f != nil || out != "two\n" {
		t.Fatalf("first run: %q %+v", out, f)
	}
	// Cached: a program installed earlier in PATH is not seen (as with a
	// shell's command hash) while the cached one still runs.
	writeScript(t, bin1, "wf-cache-tool", "echo one")
	if out, f := run(); f != nil || out != "two\n" {
		t.Fatalf("cached run: %q %+v", out, f)
	}
	// The cached program is gone: found again in bin1, same attempt.
	if err := os.Remove(filepath.Join(bin2, "wf-cache-tool")); err != nil {
		t.Fatal(err)
	}
	if out, f := run(); f != nil || out != "one\n" {
		t.Fatalf("after removal: %q %+v", out, f)
	}
	// Gone everywhere: not found, and found again once it is back.
	if err := os.Remove(filepath.Join(bin1, "wf-cache-tool")); err != nil {
		t.Fatal(err)
	}
	if _, f := run(); f == nil || f.Type != TypeExecNotFound {
		t.Fatalf("removed everywhere: failure = %+v, want %s", f, TypeExecNotFound)
	}
	writeScript(t, bin2, "wf-cache-tool", "echo back")
	if out, f := run(); f != nil || out != "back\n" {
		t.Fatalf("reinstalled: %q %+v", out, f)
	}
}

// A working directory that disappears after the program was cached is
// still reported as a working directory problem.
func TestExecMissingDirAfterCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t, Options{})
	req := scriptReq(dir, "")
	req.Spec.Exec.Script = ""
	req.Spec.Exec.Command = []string{"true"}
	if res := r.Run(context.Background(), req); res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	res := r.Run(context.Background(), req)
	if res.Failure == nil || res.Failure.Type != TypeExecStart || !strings.Contains(res.Failure.Message, "working directory") {
		t.Fatalf("failure = %+v, want %s about the working directory", res.Failure, TypeExecStart)
	}
}

func TestExecBaseEnvDefaultsToProcessEnv(t *testing.T) {
	t.Setenv("WF_TEST_INHERITED", "yes")
	r := NewRunner(Options{TempDir: t.TempDir()})
	res := r.Run(context.Background(), scriptReq(t.TempDir(), `printf %s "$WF_TEST_INHERITED"`))
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	if out := decodeOutputs(t, res.Outputs); out["stdout"] != "yes" {
		t.Errorf("stdout = %q, want the inherited variable", out["stdout"])
	}
}

func TestExecEmptyBaseEnvStillFindsCommands(t *testing.T) {
	r := newTestRunner(t, Options{BaseEnv: []string{}})
	req := scriptReq(t.TempDir(), "")
	req.Spec.Exec.Command = []string{"true"}
	req.Spec.Exec.Script = ""
	if res := r.Run(context.Background(), req); res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
}

// pidAlive reports whether pid is a live (not zombie) process. A zombie
// counts as dead: in a container nobody may reap it.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("background process %d survived", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("background pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("background pid %q: %v", b, err)
	}
	return pid
}

// bgScript starts `sleep 30` in the background (keeping stdout open),
// records its pid and then blocks.
const bgScript = `sleep 30 & echo $! > "$BG_PID"; echo started; echo started >&2; wait`

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile)})
	req := scriptReq(dir, bgScript)
	req.Timeout = 500 * time.Millisecond

	begin := time.Now()
	res := r.Run(context.Background(), req)
	took := time.Since(begin)
	// The background sleep would hold Run for 30s: a generous bound
	// (load, the race detector) still tells a kill from a wait.
	if took > req.Timeout+10*time.Second {
		t.Errorf("Run took %v, want the timeout and a kill, not the 30s sleep", took)
	}
	if res.Failure == nil || res.Failure.Type != TypeTimeout {
		t.Fatalf("failure = %+v, want timeout", res.Failure)
	}
	if !strings.Contains(res.Failure.Message, "500ms") {
		t.Errorf("message %q does not name the timeout", res.Failure.Message)
	}
	out := decodeOutputs(t, res.Outputs)
	if out["stdout"] != "started\n" || out["exit_code"] != -1.0 {
		t.Errorf("outputs = %s", res.Outputs)
	}
	waitDead(t, readPID(t, pidFile))
}

func TestExecCancelInterrupts(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile)})
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(300*time.Millisecond, cancel)
	defer timer.Stop()
	req := scriptReq(dir, bgScript)
	req.Timeout = time.Minute

	begin := time.Now()
	res := r.Run(ctx, req)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("Run took %v after cancellation, want a kill, not the 30s sleep", took)
	}
	if res.Failure == nil || res.Failure.Type != TypeInterrupted {
		t.Fatalf("failure = %+v, want interrupted", res.Failure)
	}
	waitDead(t, readPID(t, pidFile))
}

func TestExecCancelledBeforeStart(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	r := newTestRunner(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Run(ctx, scriptReq(dir, "touch "+marker))
	if res.Failure == nil || res.Failure.Type != TypeInterrupted {
		t.Fatalf("failure = %+v, want interrupted", res.Failure)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Error("the process ran although ctx was already cancelled")
	}
}

// A background child that keeps stdout open after the leader exits must not
// hold Run until it finishes.
func TestExecLingeringChildDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := newTestRunner(t, Options{BaseEnv: append(testEnv(), "BG_PID="+pidFile), WaitDelay: 200 * time.Millisecond})
	begin := time.Now()
	res := r.Run(context.Background(), scriptReq(dir, `sleep 30 & echo $! > "$BG_PID"; echo '{"done":true}'`))
	took := time.Since(begin)
	t.Cleanup(func() {
		if pid := readPID(t, pidFile); pidAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if took > 10*time.Second {
		t.Errorf("Run took %v; a lingering child held it (its sleep is 30s)", took)
	}
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	if out := decodeOutputs(t, res.Outputs); out["stdout"] != "{\"done\":true}\n" {
		t.Errorf("stdout = %q", out["stdout"])
	}
}

func TestExecOutputCap(t *testing.T) {
	const max = 1000
	tests := []struct {
		name     string
		script   string
		wantType string // "" for success
		wantMsg  []string
	}{
		{name: "failure notes truncation",
			script:   `head -c 5000 /dev/zero | tr '\0' a; head -c 3000 /dev/zero | tr '\0' b >&2; echo THE-END >&2; exit 1`,
			wantType: "exit:1",
			wantMsg:  []string{"stdout truncated to the first 1000 of 5000 bytes", "stderr truncated to the first 1000 of 3008 bytes", "THE-END"}},
		{name: "truncated json stdout is not a result",
			script: `printf '[1'; head -c 3000 /dev/zero | tr '\0' 1; printf ']'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{MaxOutput: max})
			res := r.Run(context.Background(), scriptReq(t.TempDir(), tt.script))
			out := decodeOutputs(t, res.Outputs)
			if n := len(out["stdout"].(string)); n != max {
				t.Errorf("len(stdout) = %d, want %d", n, max)
			}
			if out["result"] != nil {
				t.Errorf("result = %v, want null for a truncated stdout", out["result"])
			}
			if tt.wantType == "" {
				if res.Failure != nil {
					t.Fatalf("failure %+v", *res.Failure)
				}
				return
			}
			if res.Failure == nil || res.Failure.Type != tt.wantType {
				t.Fatalf("failure = %+v, want %s", res.Failure, tt.wantType)
			}
			if n := len(out["stderr"].(string)); n != max {
				t.Errorf("len(stderr) = %d, want %d", n, max)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(res.Failure.Message, s) {
					t.Errorf("message %q does not contain %q", res.Failure.Message, s)
				}
			}
		})
	}
}

func TestCapBuffer(t *testing.T) {
	tests := []struct {
		name      string
		max       int64
		writes    []string
		head      string
		tail      string
		truncated bool
	}{
		{name: "fits", max: 10, writes: []string{"abc", "def"}, head: "abcdef", tail: "abcdef"},
		{name: "exactly full", max: 6, writes: []string{"abc", "def"}, head: "abcdef", tail: "abcdef"},
		{name: "overflow in one write", max: 4, writes: []string{"abcdef"}, head: "abcd", tail: "abcdef", truncated: true},
		{name: "overflow across writes", max: 4, writes: []string{"ab", "cd", "ef"}, head: "abcd", tail: "abcdef", truncated: true},
		{name: "tail keeps the end", max: 2, writes: []string{strings.Repeat("x", 600), "  the end\n"},
			head: "xx", tail: strings.Repeat("x", tailSize-len("  the end\n")) + "  the end", truncated: true},
		{name: "tail from a big write", max: 1, writes: []string{strings.Repeat("y", 700) + "z"},
			head: "y", tail: strings.Repeat("y", tailSize-1) + "z", truncated: true},
		{name: "tail drops a cut rune", max: 1, writes: []string{"a" + strings.Repeat("€", 200)},
			head: "a", tail: strings.Repeat("€", 170), truncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapBuffer(tt.max)
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if string(c.Bytes()) != tt.head {
				t.Errorf("head = %q, want %q", c.Bytes(), tt.head)
			}
			if c.Tail() != tt.tail {
				t.Errorf("tail = %q, want %q", c.Tail(), tt.tail)
			}
			if c.Truncated() != tt.truncated {
				t.Errorf("truncated = %v", c.Truncated())
			}
		})
	}
}

func TestSignalName(t *testing.T) {
	tests := []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGKILL, "SIGKILL"},
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGSEGV, "SIGSEGV"},
		{syscall.Signal(40), "SIG40"},
	}
	for _, tt := range tests {
		if got := signalName(tt.sig); got != tt.want {
			t.Errorf("signalName(%d) = %q, want %q", tt.sig, got, tt.want)
		}
	}
}

func TestCapBufferReadFrom(t *testing.T) {
	tests := []struct {
		name string
		size int
		max  int64
	}{
		{name: "empty", size: 0, max: 1000},
		{name: "smaller than the first chunk", size: 100, max: 1000},
		{name: "several chunks, under the cap", size: 3*readChunk + 5, max: 1 << 20},
		{name: "several chunks, over the cap", size: 3*readChunk + 5, max: readChunk + 1},
	}
	readers := map[string]func(io.Reader) io.Reader{
		// Hide bytes.Reader's WriterTo so ReadFrom does the reading.
		"full reads": func(r io.Reader) io.Reader { return struct{ io.Reader }{r} },
		"half reads": iotest.HalfReader,
		"one byte":   iotest.OneByteReader,
	}
	for _, tt := range tests {
		for rname, wrap := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				src := bytes.Repeat([]byte("0123456789"), tt.size/10+1)[:tt.size]
				c := newCapBuffer(tt.max)
				n, err := c.ReadFrom(wrap(bytes.NewReader(src)))
				if err != nil || n != int64(tt.size) {
					t.Fatalf("ReadFrom = %d, %v", n, err)
				}
				want := src
				if int64(len(want)) > tt.max {
					want = want[:tt.max]
				}
				if !bytes.Equal(c.Bytes(), want) {
					t.Errorf("head differs: %d bytes, want %d", len(c.Bytes()), len(want))
				}
				if c.Truncated() != (int64(tt.size) > tt.max) {
					t.Errorf("truncated = %v", c.Truncated())
				}
			})
		}
	}
}

func TestCapBufferReadFromError(t *testing.T) {
	boom := errors.New("boom")
	c := newCapBuffer(100)
	n, err := c.ReadFrom(iotest.DataErrReader(iotest.ErrReader(boom)))
	if n != 0 || !errors.Is(err, boom) {
		t.Errorf("ReadFrom = %d, %v; want 0, boom", n, err)
	}
}
