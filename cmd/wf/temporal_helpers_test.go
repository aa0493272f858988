package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/temporal/temporaltest"
)

// tenv points the wf processes of a test at the shared server, on a task
// queue of the test's own.
type tenv struct {
	t     *testing.T
	addr  string
	queue string
	dir   string
}

func newTEnv(t *testing.T, hcl string) *tenv {
	t.Helper()
	srv := temporaltest.Need(t)
	e := &tenv{t: t, addr: srv.Address, queue: "q-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + fmt.Sprint(time.Now().UnixNano()), dir: durSetup(t, hcl)}
	t.Setenv("WF_TEMPORAL_ADDRESS", srv.Address)
	return e
}

// worker starts `wf worker` on the test's queue; the returned process is
// killed at the end of the test.
func (e *tenv) worker() *exec.Cmd {
	e.t.Helper()
	cmd, _ := e.workerWith()
	return cmd
}

// workerWith starts `wf worker` with extra flags; exited is closed once
// it has exited.
func (e *tenv) workerWith(extra ...string) (cmd *exec.Cmd, exited <-chan struct{}) {
	e.t.Helper()
	args := append([]string{"worker", "-task-queue", e.queue}, extra...)
	cmd = exec.Command(durBinary(e.t), append(args, e.dir)...)
	cmd.Env = os.Environ()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if e.t.Failed() {
			e.t.Logf("worker %d output:\n%s", cmd.Process.Pid, buf.String())
		}
	})
	return cmd, done
}

// apply starts `wf apply -engine temporal -json` in the background.
func (e *tenv) apply(extra ...string) *durProc {
	e.t.Helper()
	return durStart(e.t, e.dir, append([]string{"-engine", "temporal", "-task-queue", e.queue}, extra...)...)
}

// wf runs a wf command to its end and returns its stdout, stderr and exit
// code.
func (e *tenv) wf(args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(durBinary(e.t), args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

type histEntry struct {
	Activity       string    `json:"activity"`
	Attempt        int       `json:"attempt"`
	IdempotencyKey string    `json:"idempotency_key"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	Outcome        string    `json:"outcome"`
	Error          *struct {
		Type string `json:"type"`
	} `json:"error"`
	WaitMs *int64 `json:"wait_ms"`
}

func (e *tenv) history(instance string) []histEntry {
	e.t.Helper()
	out, errOut, code := e.wf("history", "-engine", "temporal", "-json", instance)
	if code != 0 {
		e.t.Fatalf("wf history exit %d: %s", code, errOut)
	}
	var hs []histEntry
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var h histEntry
		if err := dec.Decode(&h); err != nil {
			e.t.Fatalf("decode history: %v\n%s", err, out)
		}
		hs = append(hs, h)
	}
	return hs
}

func evType(typ string) func(map[string]any) bool {
	return func(ev map[string]any) bool { return ev["type"] == typ }
}

func attemptStarted(activity string, n int) func(map[string]any) bool {
	return func(ev map[string]any) bool {
		return ev["type"] == "attempt_started" && ev["activity"] == "activity."+activity && ev["attempt"] == float64(n)
	}
}
