package main

// Idempotency keys come from the state's identity (SPEC §4.2), and the
// orphan supervision never touches a process that merely reused a PID.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/proc"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

const keyHCL = `
workflow "dur" {
  key = "k1"
  activity "charge" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", HANG_ON = "${hang}" }
    }
  }
}
`

func keySetup(t *testing.T, hangOn string) string {
	t.Helper()
	return durSetup(t, strings.ReplaceAll(keyHCL, "${hang}", hangOn))
}

func applyOK(t *testing.T, dir string) {
	t.Helper()
	p := durStart(t, dir)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("apply exited %d; stderr:\n%s", code, p.stderr.String())
	}
}

// TestKeysDifferAcrossStates: two state directories with the same
// workflow, key and activity names send different keys; `wf state rm`
// and a new apply send a new one.
func TestKeysDifferAcrossStates(t *testing.T) {
	t.Parallel()
	a, b := keySetup(t, "0"), keySetup(t, "0")
	applyOK(t, a)
	applyOK(t, b)
	ka := durReadLog(t, filepath.Join(a, "log"))[0].Key
	kb := durReadLog(t, filepath.Join(b, "log"))[0].Key
	if ka == kb {
		t.Fatalf("two states with the same names share key %s", ka)
	}

	if out, err := exec.Command(durBinary(t), "state", "rm", "dur/k1", a).CombinedOutput(); err != nil {
		t.Fatalf("state rm: %v\n%s", err, out)
	}
	applyOK(t, a)
	log := durReadLog(t, filepath.Join(a, "log"))
	if len(log) != 2 || log[1].Key == ka {
		t.Fatalf("after wf state rm: %+v; want a second run under a new key", log)
	}
}

// TestKeySurvivesMove: a state directory moved elsewhere after a crash
// mid-attempt resumes under the same key. (Moving the configuration with
// it is the definition hash's business: SPEC §4.2, tested with config.)
func TestKeySurvivesMove(t *testing.T) {
	t.Parallel()
	dir := keySetup(t, "1")
	p := durStart(t, dir)
	waitLogged(t, dir, "charge", 1)
	p.kill9(t)
	moved := filepath.Join(t.TempDir(), "moved-state")
	if err := os.Rename(filepath.Join(dir, ".wf"), moved); err != nil {
		t.Fatal(err)
	}
	p2 := durStart(t, dir, "-state-dir", moved)
	if code := p2.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("apply exited %d; stderr:\n%s", code, p2.stderr.String())
	}
	log := durReadLog(t, filepath.Join(dir, "log"))
	if len(log) != 2 || log[1].Number != 2 || log[1].Key != log[0].Key {
		t.Fatalf("attempts %+v; want attempt 2 under the same key after the move", log)
	}
}

// TestReusedPIDNotKilled: a spawn record whose PID now belongs to an
// unrelated process (its start time differs) leaves that process alone,
// and the next attempt runs.
func TestReusedPIDNotKilled(t *testing.T) {
	t.Parallel()
	dir := keySetup(t, "1")
	p := durStart(t, dir)
	waitLogged(t, dir, "charge", 1)
	p.kill9(t)
	// End the real orphan as an operator would, so only the fake record
	// below names a live process.
	log := durReadLog(t, filepath.Join(dir, "log"))
	tbl := &proc.Table{}
	if _, err := tbl.End([]proc.Attempt{{Env: []string{"WF_IDEMPOTENCY_KEY=" + log[0].Key, "WF_ATTEMPT=1"}}}, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	bystander := exec.Command("sleep", "60")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = bystander.Wait(); close(exited) }()
	t.Cleanup(func() { _ = bystander.Process.Kill(); <-exited })
	pid := bystander.Process.Pid
	ticks, err := tbl.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := tbl.BootID()
	if err != nil {
		t.Fatal(err)
	}
	st, err := statefile.Open(filepath.Join(dir, ".wf"), statefile.Options{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// The attempt's process "was" pid, but started at another time.
	err = st.RecordSpawn(&record.Spawn{Workflow: "dur", Instance: "k1", Activity: "charge", Generation: 1, Number: 1,
		PID: pid, StartTicks: ticks - 1, BootID: boot, Recorded: time.Now()})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	applyOK(t, dir)
	select {
	case <-exited:
		t.Fatal("wf killed a process that merely reused the recorded PID")
	default:
	}
	if s, err := tbl.Stat(pid); err != nil || s.Exited() || s.StartTicks != ticks {
		t.Fatalf("bystander: %+v, %v", s, err)
	}
	if log := durReadLog(t, filepath.Join(dir, "log")); len(log) != 2 || log[1].Number != 2 {
		t.Fatalf("attempts %+v; want attempt 2", log)
	}
}
