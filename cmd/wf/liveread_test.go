package main

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// liveReadConfig: prep succeeds at once; charge fails and waits an hour
// for its retry, so the state stays put while the apply runs.
const liveReadConfig = `workflow "order" {
  key = "o-1"

  activity "prep" {
    exec {
      script = "echo prepared; ./rec.sh"
      env    = { LOG = "log" }
    }
  }

  activity "charge" {
    exec {
      script = "echo charging; ./rec.sh"
      env    = { LOG = "log", SUCCEED_ON = "99" }
    }
    retry {
      maximum_attempts = 3
      initial_interval = "1h"
    }
  }

  output "prepared" {
    value = activity.prep.stdout
  }
}
`

// liveReads are the reading commands of SPEC §8, each in its forms.
var liveReads = [][]string{
	{"plan"},
	{"plan", "-json"},
	{"history", "order/o-1"},
	{"history", "-json", "order/o-1"},
	{"history", "-full", "order/o-1", "charge"},
	{"state", "list"},
	{"state", "list", "-json"},
	{"state", "show", "order/o-1"},
	{"state", "show", "-json", "order/o-1"},
	{"state", "show", "-full", "order/o-1"},
	{"stats"},
	{"stats", "-json"},
	{"output", "order/o-1"},
	{"output", "-json", "order/o-1"},
}

// relative are the parts of the output that depend on when a command
// runs, not on the state: "in 59m58s", plan's creation time, the time a
// pending retry has waited so far (stats).
var relative = []*regexp.Regexp{
	regexp.MustCompile(`in [0-9hms.]+`),
	regexp.MustCompile(`"created": "[^"]*"`),
	regexp.MustCompile(`"retry_wait_ms": [0-9]+`),
	regexp.MustCompile(`(?m) +[0-9.]+[mh]?s +0s$`),
}

// columns are runs of spaces, which a table widens or narrows with the
// relative figures in it.
var columns = regexp.MustCompile(` {2,}`)

func normalize(s string) string {
	for _, re := range relative {
		s = re.ReplaceAllString(s, "<relative>")
	}
	return columns.ReplaceAllString(s, "  ")
}

func runBinary(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(durBinary(t), append(args, dir)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "NO_COLOR=1", "TZ=UTC"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("wf %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), code
}

// TestReadsWhileApplyRuns: while an apply holds the state, every reading
// command works from another process, answered by the apply over its
// socket, and prints what it prints from the state itself once the apply
// is gone; only the commands that change state get the lock error.
func TestReadsWhileApplyRuns(t *testing.T) {
	dir := durSetup(t, liveReadConfig)
	p := durStart(t, dir)
	p.waitEvent(t, 60*time.Second, "charge's retry scheduled", func(ev map[string]any) bool {
		return ev["type"] == "retry_scheduled" && ev["activity"] == "activity.charge"
	})
	p.waitEvent(t, 60*time.Second, "prep succeeded", func(ev map[string]any) bool {
		return ev["type"] == "activity_succeeded" && ev["activity"] == "activity.prep"
	})

	during := map[string]string{}
	for _, args := range liveReads {
		name := strings.Join(args, " ")
		out, errOut, code := runBinary(t, dir, args...)
		if code != 0 {
			t.Fatalf("wf %s during the apply: exit %d\n%s", name, code, errOut)
		}
		during[name] = out
	}
	if !strings.Contains(during["history -full order/o-1 charge"], "charging") {
		t.Errorf("history -full during the apply lacks what the attempt printed:\n%s", during["history -full order/o-1 charge"])
	}
	if !strings.Contains(during["output order/o-1"], "prepared") {
		t.Errorf("output during the apply:\n%s", during["output order/o-1"])
	}
	if !strings.Contains(during["plan"], "1 to resume") {
		t.Errorf("plan during the apply:\n%s", during["plan"])
	}
	// Commands that change the state wait for the lock or fail on it.
	for _, args := range [][]string{{"state", "rm", "order/o-1"}, {"apply", "-auto-approve"}} {
		_, errOut, code := runBinary(t, dir, args...)
		if code != 1 || !strings.Contains(errOut, "state is locked by PID") {
			t.Errorf("wf %s during the apply: exit %d, stderr %q; want the lock error", strings.Join(args, " "), code, errOut)
		}
	}
	select {
	case <-p.done:
		t.Fatalf("the apply ended during the reads (%d): %s", p.exit, p.stderr.String())
	default:
	}

	// Stop the apply (the state stays as it was: charge waits for its
	// retry) and read the state itself.
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 60*time.Second); code != exitInterrupted {
		t.Fatalf("apply exited %d after SIGINT, want %d: %s", code, exitInterrupted, p.stderr.String())
	}
	for _, args := range liveReads {
		name := strings.Join(args, " ")
		out, errOut, code := runBinary(t, dir, args...)
		if code != 0 {
			t.Fatalf("wf %s after the apply: exit %d\n%s", name, code, errOut)
		}
		if got, want := normalize(during[name]), normalize(out); got != want {
			t.Errorf("wf %s: during the apply (over the socket) differs from the state itself:\n--- during ---\n%s\n--- after ---\n%s", name, got, want)
		}
	}
}
