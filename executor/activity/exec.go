package activity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wf-engine/wf/config"
)

// defaultPATH is searched when the activity's environment has no PATH, as
// execvp does, so that an activity with a scrubbed environment can still run
// `true` or `sh`.
const defaultPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// execOutputs is the outputs object of an exec attempt. Result marshals as
// null when nil.
type execOutputs struct {
	Stdout   string          `json:"stdout"`
	Stderr   string          `json:"stderr"`
	ExitCode int             `json:"exit_code"`
	Result   json.RawMessage `json:"result"`
}

// runExec runs one exec attempt. The process gets its own process group so
// that a timeout or cancellation kills everything it spawned, not just the
// direct child, and dies with wf (Pdeathsig). Once it has started, the
// spawn hook of ctx (WithSpawnHook) learns its PID. With a heartbeat
// timeout it is watched as heartbeat.go says; details is the last content
// of its heartbeat file.
func (r *Runner) runExec(ctx context.Context, req Request) (any, *Failure, string) {
	spec := req.Spec.Exec
	out := &execOutputs{ExitCode: -1}
	var details string

	argv, err := execArgv(spec)
	if err != nil {
		return out, &Failure{Type: TypeInvalidSpec, Message: err.Error(), NonRetryable: true}, details
	}

	// The attempt's files are fresh paths in the Runner's directory: a file
	// left behind by attempt n can never be read as the output of attempt
	// n+1 (see execShared).
	files, err := r.shared.acquire(r.tempDir)
	if err != nil {
		return out, &Failure{Type: TypeExecStart, Message: err.Error()}, details
	}
	defer r.shared.release()

	heartbeatFile := ""
	if req.HeartbeatTimeout > 0 {
		heartbeatFile = files.heartbeat
	}
	env := r.execEnv(req, spec, files.output, files.error, heartbeatFile)
	pathEnv := envValue(env, "PATH")
	path, cached, err := r.shared.lookPath(argv[0], pathEnv, spec.Dir)
	if err != nil {
		if f := dirFailure(spec.Dir); f != nil {
			return out, f, details
		}
		return out, notFound(err.Error()), details
	}

	actx, cancel := attemptContext(ctx, req.Timeout)
	defer cancel()
	// The heartbeat watch kills the attempt through its own cancel, so
	// that the cause tells a missed heartbeat from a timeout.
	actx, killHung := context.WithCancelCause(actx)
	defer killHung(nil)
	if heartbeatFile != "" {
		if err := createHeartbeatFile(heartbeatFile); err != nil {
			return out, &Failure{Type: TypeExecStart, Message: err.Error()}, details
		}
		defer removeFile(heartbeatFile)
	}

	stdout, stderr := newCapBuffer(r.maxOutput), newCapBuffer(r.maxOutput)
	pipes, err := newAttemptPipes()
	if err != nil {
		return out, &Failure{Type: TypeExecStart, Message: err.Error()}, details
	}
	defer pipes.close()
	// One entry per name, the last, as os/exec passed it (a NUL
	// fails the start, as there).
	env, envErr := dedupEnvAfter(env, len(r.baseEnv), r.baseNames)
	withPidfd := usePidfd()
	// As exec.CommandContext's Start does, a context already done starts
	// nothing. (One done just after this is seen by pipes.wait, which
	// kills the group at once.)
	start := func(path string) (sp Spawned, pidfd int, err error) {
		if err := actx.Err(); err != nil {
			return Spawned{}, -1, err
		}
		if envErr != nil {
			return Spawned{}, -1, envErr
		}
		return startProcess(path, argv, env, spec.Dir, files.stdin.Fd(), uintptr(pipes.outW), uintptr(pipes.errW), withPidfd)
	}
	spawned, pidfd, err := start(path)
	if err != nil {
		r.shared.forget(argv[0], pathEnv, spec.Dir)
		// A cached program may have been removed or moved since it was
		// looked up: look again, and try once more if it is elsewhere now.
		if cached {
			if fresh, _, lerr := r.shared.lookPath(argv[0], pathEnv, spec.Dir); lerr == nil && fresh != path {
				spawned, pidfd, err = start(fresh)
			}
		}
		if err != nil {
			r.shared.forget(argv[0], pathEnv, spec.Dir)
			// The child's chdir error is indistinguishable from a missing
			// program (both ENOENT), so the directory is checked, only
			// now that something failed.
			if f := dirFailure(spec.Dir); f != nil {
				return out, f, details
			}
			return out, startFailure(argv[0], err), details
		}
	}
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	pid := spawned.PID
	pipes.closeChildEnds()
	if hook := spawnHook(ctx); hook != nil {
		hook(spawned)
	}
	var hb *heartbeatWatch
	if heartbeatFile != "" {
		hb = watchHeartbeat(ctx, heartbeatFile, req.HeartbeatTimeout, r.now, killHung)
	}
	// The process may have written either file; neither may outlive the
	// attempt. takeFile removes what it reads; this catches the error file
	// of a successful attempt and the files of an attempt whose wait failed.
	outputTaken, errorTaken := false, false
	defer func() {
		if !outputTaken {
			removeFile(files.output)
		}
		if !errorTaken {
			removeFile(files.error)
		}
	}()
	ws, waitErr := pipes.wait(actx, pid, pidfd, stdout, stderr, r.waitDelay)
	var (
		hung      bool
		sinceBeat time.Duration
		beats     int
	)
	if hb != nil {
		details, hung, sinceBeat, beats = hb.stop()
	}

	out.Stdout = string(stdout.Bytes())
	out.Stderr = string(stderr.Bytes())
	if waitErr != nil && !errors.Is(waitErr, errCapture) {
		// Not reaped (ECHILD: not wf's child any more): no status.
		return out, &Failure{Type: TypeExecStart, Message: fmt.Sprintf("wait for %s: %v", argv[0], waitErr)}, details
	}
	out.ExitCode = exitCode(ws)
	if errors.Is(waitErr, errCapture) {
		// wf lost track of the output (a poll failure: ENOMEM at
		// worst) and killed the process group: whatever the exit
		// status, the outputs are not the process's.
		return out, &Failure{Type: TypeInternal, Message: fmt.Sprintf("capture the output of %s: %v; process group killed", argv[0], waitErr)}, details
	}
	notes := joinNotes(stdout.truncationNote("stdout"), stderr.truncationNote("stderr"))

	fileResult, fileErr := readOutputFile(files.output, r.maxOutput)
	outputTaken = true
	if fileErr == nil && fileResult == nil {
		out.Result = parseJSONResult(stdout.Bytes(), stdout.Truncated())
	} else {
		out.Result = fileResult
	}

	// Exit 0 is success whatever else happened: the timeout may have fired
	// just after the process finished, and an error file written by a
	// process that then succeeded is not an error.
	if ws.Exited() && ws.ExitStatus() == 0 {
		if fileErr != nil {
			typ := TypeOutputInvalidJSON
			if errors.Is(fileErr, errTooLarge) {
				typ = TypeOutputTooLarge
			}
			return out, &Failure{Type: typ, Message: joinNotes(fileErr.Error(), notes), NonRetryable: true}, details
		}
		return out, nil, details
	}

	tail := stderr.Tail()
	switch {
	case ctx.Err() != nil:
		return out, &Failure{Type: TypeInterrupted, Message: joinNotes("cancelled while running; process group killed", stderrNote(tail), notes)}, details
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		return out, &Failure{Type: TypeTimeout, Message: joinNotes(fmt.Sprintf("timed out after %s; process group killed", req.Timeout), stderrNote(tail), notes)}, details
	case hung && errors.Is(context.Cause(actx), errHeartbeat):
		return out, heartbeatFailure(req.HeartbeatTimeout, sinceBeat, beats, stderrNote(tail), notes), details
	}

	if ws.Signaled() {
		name := signalName(ws.Signal())
		return out, &Failure{Type: "signal:" + name, Message: joinNotes("killed by "+name, stderrNote(tail), notes)}, details
	}

	code := exitCode(ws)
	msg := tail
	if msg == "" {
		msg = "exit status " + strconv.Itoa(code)
	}
	ef, efErr := readErrorFile(files.error, r.maxOutput)
	errorTaken = true
	switch {
	case efErr != nil:
		return out, &Failure{Type: "exit:" + strconv.Itoa(code), Message: joinNotes(msg, "ignored malformed $WF_ERROR_FILE: "+efErr.Error(), notes)}, details
	case ef != nil:
		ef.Message = joinNotes(ef.Message, notes)
		return out, ef, details
	}
	return out, &Failure{Type: "exit:" + strconv.Itoa(code), Message: joinNotes(msg, notes)}, details
}

// exitCode is the process's exit status, or -1 when a signal ended it
// (os.ProcessState.ExitCode's convention).
func exitCode(ws syscall.WaitStatus) int {
	if !ws.Exited() {
		return -1
	}
	return ws.ExitStatus()
}

// execArgv is the argv of the process: Command as is, or Script through
// /bin/sh -c.
func execArgv(spec *config.ExecSpec) ([]string, error) {
	switch {
	case len(spec.Command) > 0 && spec.Script != "":
		return nil, errors.New("exec has both command and script")
	case len(spec.Command) > 0:
		if spec.Command[0] == "" {
			return nil, errors.New("exec command has an empty program name")
		}
		return append([]string(nil), spec.Command...), nil
	case spec.Script != "":
		return []string{"/bin/sh", "-c", spec.Script}, nil
	}
	return nil, errors.New("exec has neither command nor script")
}

// execEnv builds the process environment: the base environment, then the
// activity's env (sorted, so the result is deterministic), then the WF_*
// variables. dedupEnv keeps the last value of a duplicated name, so the
// WF_* variables cannot be overridden by accident.
func (r *Runner) execEnv(req Request, spec *config.ExecSpec, outputFile, errorFile, heartbeatFile string) []string {
	env := make([]string, 0, len(r.baseEnv)+len(spec.Env)+9)
	env = append(env, r.baseEnv...)
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env,
		"WF_IDEMPOTENCY_KEY="+req.IdempotencyKey,
		"WF_ATTEMPT="+strconv.Itoa(req.Attempt),
		"WF_WORKFLOW="+req.Workflow,
		"WF_INSTANCE="+req.Instance,
		"WF_ACTIVITY="+req.Activity,
		"WF_OUTPUT_FILE="+outputFile,
		"WF_ERROR_FILE="+errorFile,
	)
	if heartbeatFile != "" {
		env = append(env, "WF_HEARTBEAT_FILE="+heartbeatFile)
	}
	if d := strings.ReplaceAll(req.HeartbeatDetails, "\x00", ""); d != "" {
		env = append(env, "WF_HEARTBEAT_DETAILS="+d)
	}
	return env
}

// envValue returns the last value of name in env, as the process will see
// it, and "" when unset.
func envValue(env []string, name string) string {
	prefix := name + "="
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], prefix) {
			return env[i][len(prefix):]
		}
	}
	return ""
}

// lookPath finds the program the way the activity would: a name with a slash
// is relative to the working directory dir, a bare name is searched in the
// activity's own PATH (not wf's), whose relative entries are also relative
// to dir.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("command %q: %w", name, err)
		}
		return p, nil
	}
	if pathEnv == "" {
		pathEnv = defaultPATH
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH (searched %s)", name, pathEnv)
}

// notFound is the failure of a command that does not exist or cannot be
// executed: a mistake in the configuration (or the machine), which the
// retry policy does not retry unless a rule names exec:not_found
// (retry.Decide).
func notFound(msg string) *Failure {
	return &Failure{Type: TypeExecNotFound, Message: msg + " (a configuration mistake: not retried unless a retry rule lists exec:not_found in retryable_errors)"}
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

// dirFailure reports a working directory that does not exist or is not a
// directory; nil when dir is fine or empty (wf's own).
func dirFailure(dir string) *Failure {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return &Failure{Type: TypeExecStart, Message: fmt.Sprintf("working directory: %v", err)}
	case !fi.IsDir():
		return &Failure{Type: TypeExecStart, Message: fmt.Sprintf("working directory %s is not a directory", dir)}
	}
	return nil
}

// startFailure types an error from cmd.Start.
func startFailure(name string, err error) *Failure {
	for _, errno := range []syscall.Errno{syscall.ENOENT, syscall.EACCES, syscall.ENOEXEC, syscall.ENOTDIR, syscall.EISDIR} {
		if errors.Is(err, errno) {
			return notFound(fmt.Sprintf("start %s: %v", name, err))
		}
	}
	return &Failure{Type: TypeExecStart, Message: fmt.Sprintf("start %s: %v", name, err)}
}

// killGroup SIGKILLs the process group led by pid. A group that is already
// gone is not an error.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

func stderrNote(tail string) string {
	if tail == "" {
		return ""
	}
	return "stderr: " + tail
}

// readOutputFile returns the JSON in $WF_OUTPUT_FILE (and removes the
// file), nil when the activity did not write it or left it empty, or an error when it is invalid or too large.
func readOutputFile(path string, max int64) (json.RawMessage, error) {
	b, err := takeFile(path, max)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("$WF_OUTPUT_FILE: %w", errTooLarge)
		}
		return nil, fmt.Errorf("$WF_OUTPUT_FILE: %w", err)
	}
	b = trimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, fmt.Errorf("$WF_OUTPUT_FILE is not valid JSON: %v", err)
	}
	return json.RawMessage(b), nil
}

// errorFileDoc is what an activity may write to $WF_ERROR_FILE.
type errorFileDoc struct {
	Type         string          `json:"type"`
	Message      string          `json:"message"`
	NonRetryable bool            `json:"non_retryable"`
	RetryAfter   json.RawMessage `json:"retry_after"`
}

// readErrorFile returns the failure described by $WF_ERROR_FILE (and
// removes the file), nil when the activity did not write it or left it
// empty, or an error when it is malformed. retry_after
// is a Go duration string ("5s") or a number of seconds.
func readErrorFile(path string, max int64) (*Failure, error) {
	b, err := takeFile(path, max)
	if err != nil {
		return nil, err
	}
	b = trimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	var doc errorFileDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	if dec.More() {
		return nil, errors.New("decode: trailing data after the JSON object")
	}
	if strings.TrimSpace(doc.Type) == "" {
		return nil, errors.New(`"type" is missing or empty`)
	}
	f := &Failure{Type: doc.Type, Message: doc.Message, NonRetryable: doc.NonRetryable}
	if ra := trimSpace(doc.RetryAfter); len(ra) > 0 && string(ra) != "null" {
		d, err := parseRetryAfterField(ra)
		if err != nil {
			return nil, err
		}
		f.RetryAfter, f.HasRetryAfter = d, true
	}
	return f, nil
}

func parseRetryAfterField(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf(`"retry_after": %v`, err)
		}
		if d < 0 {
			return 0, fmt.Errorf(`"retry_after" %q is negative`, s)
		}
		return d, nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil {
		return 0, fmt.Errorf(`"retry_after" must be a duration string like "5s" or a number of seconds, got %s`, raw)
	}
	if secs < 0 || secs > float64(1<<62)/float64(time.Second) {
		return 0, fmt.Errorf(`"retry_after" %v is out of range`, secs)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// signalName is the conventional name of sig ("SIGTERM"), or SIG<number>
// for one without a portable name (real-time signals). syscall.Signal's
// String gives descriptions such as "killed", which make poor error types.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGALRM:
		return "SIGALRM"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGCHLD:
		return "SIGCHLD"
	case syscall.SIGCONT:
		return "SIGCONT"
	case syscall.SIGFPE:
		return "SIGFPE"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGIO:
		return "SIGIO"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGPROF:
		return "SIGPROF"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGSYS:
		return "SIGSYS"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGTRAP:
		return "SIGTRAP"
	case syscall.SIGTSTP:
		return "SIGTSTP"
	case syscall.SIGTTIN:
		return "SIGTTIN"
	case syscall.SIGTTOU:
		return "SIGTTOU"
	case syscall.SIGURG:
		return "SIGURG"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGVTALRM:
		return "SIGVTALRM"
	case syscall.SIGWINCH:
		return "SIGWINCH"
	case syscall.SIGXCPU:
		return "SIGXCPU"
	case syscall.SIGXFSZ:
		return "SIGXFSZ"
	}
	return "SIG" + strconv.Itoa(int(sig))
}
