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
	return NewRunner(opts)
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
			// The script records whether the files exist while it runs.
			Script: `test -f "$WF_OUTPUT_FILE" && test -f "$WF_ERROR_FILE" && test ! -s "$WF_OUTPUT_FILE" && echo FILES=fresh; env`,
			Env:    map[string]string{"API": "http://127.0.0.1:1/x y", "WF_ATTEMPT": "99", "WF_TEST_BASE": "overridden"},
			Dir:    dir,
		}},
	}
	res := r.Run(context.Background(), req)
	if res.Failure != nil {
		t.Fatalf("failure %+v", *res.Failure)
	}
	out := decodeOutputs(t, res.Outputs)
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out["stdout"].(string)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
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
		p := env[k]
		if !strings.HasPrefix(p, tmp+string(filepath.Separator)) {
			t.Errorf("%s = %q, want a file under %s", k, p, tmp)
		}
		if _, err := os.Stat(filepath.Dir(p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("attempt directory of %s still exists after Run (stat err %v)", k, err)
		}
	}
	if env["WF_OUTPUT_FILE"] == env["WF_ERROR_FILE"] {
		t.Error("output and error files are the same file")
	}

	// Each attempt gets its own files.
	res2 := r.Run(context.Background(), req)
	out2 := decodeOutputs(t, res2.Outputs)
	if !strings.Contains(out2["stdout"].(string), "FILES=fresh") {
		t.Errorf("second attempt did not get fresh files: %s", out2["stdout"])
	}
	if strings.Contains(out2["stdout"].(string), "WF_OUTPUT_FILE="+env["WF_OUTPUT_FILE"]+"\n") {
		t.Error("second attempt reused the first attempt's output file")
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
	if took > req.Timeout+time.Second {
		t.Errorf("Run took %v, want at most timeout+1s", took)
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
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("Run took %v after cancellation", took)
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
	if took > 2*time.Second {
		t.Errorf("Run took %v; a lingering child held it", took)
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
		{name: "smaller than a chunk", size: 100, max: 1000},
		{name: "several chunks, under the cap", size: 3*readChunk + 5, max: 1 << 20},
		{name: "several chunks, over the cap", size: 3*readChunk + 5, max: readChunk + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := bytes.Repeat([]byte("0123456789"), tt.size/10+1)[:tt.size]
			c := newCapBuffer(tt.max)
			n, err := io.Copy(c, bytes.NewReader(src))
			if err != nil || n != int64(tt.size) {
				t.Fatalf("copy = %d, %v", n, err)
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
