package activity

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
