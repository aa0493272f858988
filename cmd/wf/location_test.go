package main

// End-to-end tests of SPEC §4.2 with the real binary: the definition hash and
// the idempotency key do not depend on where the configuration directory is
// or how it is reached.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const locationHCL = `
workflow "loc" {
  key = "k1"
  activity "top" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log" }
    }
  }
  activity "nested" {
    exec {
      command = ["../rec.sh"]
      dir     = "sub"
      env     = { LOG = "../log" }
    }
    depends_on = [activity.top]
  }
}
`

// wfPlain runs the real binary and returns its combined output.
func wfPlain(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(durBinary(t), args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("wf %v: %v", args, err)
	}
	return string(out), code
}

func mustNoChanges(t *testing.T, how, dir string) {
	t.Helper()
	out, code := wfPlain(t, "plan", dir)
	if code != 0 || !strings.Contains(out, "No changes.") || strings.Contains(out, "definition changed") {
		t.Errorf("plan %s (%s) exited %d, want No changes:\n%s", how, dir, code, out)
	}
}

// TestMovedClonedOrLinkedDirectoryKeepsNoChanges: after an apply, moving the
// directory (with its .wf), planning it through a symlink, or copying it
// elsewhere with cp -a all plan as "No changes", and applying the copy runs
// nothing again.
func TestMovedClonedOrLinkedDirectoryKeepsNoChanges(t *testing.T) {
	dir := durSetup(t, locationHCL)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := wfPlain(t, "apply", "-auto-approve", dir); code != 0 {
		t.Fatalf("apply exited %d:\n%s", code, out)
	}
	if n := len(durReadLog(t, filepath.Join(dir, "log"))); n != 2 {
		t.Fatalf("first apply ran %d attempts, want 2", n)
	}
	mustNoChanges(t, "in place", dir)

	root := t.TempDir()
	moved := filepath.Join(root, "moved", "proj2")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	mustNoChanges(t, "after mv", moved)

	link := filepath.Join(root, "link")
	if err := os.Symlink(moved, link); err != nil {
		t.Fatal(err)
	}
	mustNoChanges(t, "through a symlink", link)
	mustNoChanges(t, "through a symlink with a trailing slash", link+"/")

	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("cp", "-a", moved, clone).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	mustNoChanges(t, "in a cp -a copy", clone)
	if out, code := wfPlain(t, "apply", "-auto-approve", clone); code != 0 || !strings.Contains(out, "No changes.") {
		t.Fatalf("apply of the copy exited %d, want No changes:\n%s", code, out)
	}
	if n := len(durReadLog(t, filepath.Join(clone, "log"))); n != 2 {
		t.Errorf("the copy re-ran activities: %d attempts logged, want the 2 of the first apply", n)
	}
}

// TestCopyWithPendingRetryResumes: a copy of a directory whose apply was
// killed while a retry was pending resumes that retry, at the next attempt
// number and with the same idempotency key.
func TestCopyWithPendingRetryResumes(t *testing.T) {
	dir := durSetup(t, `
workflow "loc" {
  key = "k1"
  activity "flaky" {
    exec {
      command = ["./rec.sh"]
      env     = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff          = "fixed"
      initial_interval = "1500ms"
      maximum_attempts = 3
    }
  }
}
`)
	p := durStart(t, dir)
	p.waitEvent(t, 20*time.Second, "retry_scheduled", isType("retry_scheduled"))
	p.kill9(t)

	clone := filepath.Join(t.TempDir(), "elsewhere")
	if out, err := exec.Command("cp", "-a", dir, clone).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	if out, _ := wfPlain(t, "plan", clone); strings.Contains(out, "definition changed") {
		t.Fatalf("plan of the copy sees a changed definition:\n%s", out)
	}
	p2 := durStart(t, clone)
	p2.waitEvent(t, 10*time.Second, "timer_recovered", isType("timer_recovered"))
	if code := p2.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("apply of the copy exited %d; stderr:\n%s", code, p2.stderr.String())
	}
	log := durReadLog(t, filepath.Join(clone, "log"))
	if len(log) != 2 {
		t.Fatalf("copy logged %d attempts, want 2 (attempt 1 before the copy, attempt 2 after): %+v", len(log), log)
	}
	if log[1].Number != 2 {
		t.Errorf("the copy ran attempt %d, want 2", log[1].Number)
	}
	if log[0].Key != log[1].Key {
		t.Errorf("idempotency key changed in the copy: %s then %s", log[0].Key, log[1].Key)
	}
}
