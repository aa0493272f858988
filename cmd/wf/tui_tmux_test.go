package main

// The dashboard end to end: the real wf binary runs `wf apply` in a
// detached tmux session of a fixed size; the test types keys with
// tmux send-keys and reads what the terminal shows with capture-pane.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireTmux returns tmux's path. In CI (CI=true) a missing tmux fails
// the test: CI must install it. Elsewhere the test is skipped, saying why.
func requireTmux(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("tmux")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("tmux is not installed, and the dashboard's end-to-end test needs it in CI: add tmux to the CI machine (apt-get install tmux)")
	}
	t.Skipf("tmux is not installed: skipping the dashboard's end-to-end test (CI runs it)")
	return ""
}

// tmuxPane is one detached session with one pane, on its own server.
type tmuxPane struct {
	t    *testing.T
	tmux string
	sock string
	// onTimeout, when set, runs before a wait fails, to log what the
	// process under test was doing.
	onTimeout func(t *testing.T)
}

func newTmuxPane(t *testing.T, w, h int, dir, command string) *tmuxPane {
	t.Helper()
	p := &tmuxPane{t: t, tmux: requireTmux(t), sock: filepath.Join(t.TempDir(), "tmux.sock")}
	p.run("-f", "/dev/null", "new-session", "-d", "-s", "wf", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "-c", dir, command)
	t.Cleanup(func() { _ = exec.Command(p.tmux, "-S", p.sock, "kill-server").Run() })
	// Keep the pane (and what it shows) when its command exits.
	p.run("set-option", "-t", "wf", "remain-on-exit", "on")
	return p
}

func (p *tmuxPane) run(args ...string) string {
	p.t.Helper()
	out, err := exec.Command(p.tmux, append([]string{"-S", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	for _, k := range keys {
		p.run("send-keys", "-t", "wf", k)
		// One key per write, as a person types: an escape sequence split
		// across writes must still be read as one key.
		time.Sleep(40 * time.Millisecond)
	}
}

// text types literally.
func (p *tmuxPane) text(s string) {
	p.t.Helper()
	p.run("send-keys", "-t", "wf", "-l", s)
}

func (p *tmuxPane) frame() string {
	p.t.Helper()
	return p.run("capture-pane", "-p", "-t", "wf")
}

func (p *tmuxPane) flag(format string) string {
	p.t.Helper()
	return strings.TrimSpace(p.run("display-message", "-p", "-t", "wf", format))
}

// waitFor polls the screen until every pattern matches, and fails with the
// last frame after 30 seconds.
func (p *tmuxPane) waitFor(what string, patterns ...string) string {
	p.t.Helper()
	res := make([]*regexp.Regexp, len(patterns))
	for i, pat := range patterns {
		res[i] = regexp.MustCompile(pat)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		f := p.frame()
		ok := true
		for _, re := range res {
			if !re.MatchString(f) {
				ok = false
				break
			}
		}
		if ok {
			return f
		}
		if time.Now().After(deadline) {
			p.timedOut()
			p.t.Fatalf("%s: the screen never showed %q; last frame:\n%s", what, patterns, f)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGone polls until pattern no longer matches.
func (p *tmuxPane) waitGone(what, pattern string) string {
	p.t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(30 * time.Second)
	for {
		f := p.frame()
		if !re.MatchString(f) {
			return f
		}
		if time.Now().After(deadline) {
			p.timedOut()
			p.t.Fatalf("%s: %q stayed on screen:\n%s", what, pattern, f)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *tmuxPane) timedOut() {
	p.t.Helper()
	if p.onTimeout != nil {
		p.onTimeout(p.t)
	}
}

// goroutineDump sends SIGQUIT to the process whose PID is in pidFile and
// logs what it wrote to stderrFile: the Go runtime's dump of every
// goroutine, so that a wait that timed out says where wf was stuck.
func goroutineDump(pidFile, stderrFile string) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Logf("no goroutine dump: %v", err)
			return
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err != nil {
			t.Logf("no goroutine dump: pid file %q: %v", b, err)
			return
		}
		if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
			t.Logf("no goroutine dump: SIGQUIT to wf (pid %d): %v", pid, err)
			return
		}
		// The dump is written as the process exits: wait until its
		// size holds still.
		var dump []byte
		for deadline, last := time.Now().Add(10*time.Second), -1; time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			dump, _ = os.ReadFile(stderrFile)
			if len(dump) == last && (bytes.Contains(dump, []byte("goroutine ")) || !pidAlive(pid)) {
				break
			}
			last = len(dump)
		}
		t.Logf("wf (pid %d) after SIGQUIT, its stderr (%s):\n%s", pid, stderrFile, dump)
	}
}

// pidAlive reports whether a process with that PID exists (a zombie
// counts).
func pidAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// tmuxWorkflow retries "flaky" twice (with output on both streams), fails
// "declined" for good with a long message, holds the run open on "hold"
// until the test creates the gate file, and has "after_hold" wait on it,
// plus enough quick steps to need scrolling at 80x24.
func tmuxWorkflow(steps int) string {
	var b strings.Builder
	b.WriteString(`workflow "demo" {
  key = "run-1"

  activity "flaky" {
    exec {
      command = ["sh", "-c", "echo attempt $WF_ATTEMPT on stdout; echo boom on attempt $WF_ATTEMPT >&2; [ $WF_ATTEMPT -ge 3 ]"]
    }
    retry {
      backoff          = "fixed"
      initial_interval = "300ms"
      maximum_attempts = 5
    }
  }

  activity "declined" {
    exec {
      command = ["sh", "-c", "printf '{\"type\":\"CardDeclined\",\"message\":\"the card was declined by the issuer; ask the customer for another card or another means of payment, then run wf apply again\",\"non_retryable\":true}' > \"$WF_ERROR_FILE\"; exit 1"]
    }
    retry {
      maximum_attempts = 3
    }
  }

  activity "hold" {
    exec {
      command = ["sh", "-c", "while [ ! -e gate ]; do sleep 0.05; done"]
    }
  }

  activity "after_hold" {
    exec {
      command = ["true"]
    }
    depends_on = [activity.hold]
  }
`)
	for i := 0; i < steps; i++ {
		fmt.Fprintf(&b, "\n  activity \"step_%02d\" {\n    exec {\n      command = [\"true\"]\n    }\n  }\n", i)
	}
	b.WriteString("}\n")
	return b.String()
}

func TestDashboardInTmux(t *testing.T) {
	requireTmux(t)
	bin := durBinary(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(tmuxWorkflow(30)), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "raw.out")
	// The script waits for "go" so that pipe-pane records everything the
	// dashboard writes, from its first byte. wf's PID and stderr go to
	// files, for a goroutine dump if a wait times out (the dashboard is
	// on stdout).
	pidFile, stderrFile := filepath.Join(dir, "wf.pid"), filepath.Join(dir, "wf.stderr")
	script := fmt.Sprintf(`while [ ! -e go ]; do sleep 0.05; done
sh -c 'echo $$ > wf.pid; exec "$@" 2>>wf.stderr' sh %s apply -auto-approve -state-dir %s .
echo EXIT=$?
sleep 30
`, bin, filepath.Join(dir, "state"))
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := newTmuxPane(t, 80, 24, dir, "sh ./run.sh")
	p.onTimeout = goroutineDump(pidFile, stderrFile)
	p.run("pipe-pane", "-O", "-t", "wf", "cat >> "+raw)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	f := p.waitFor("dashboard", `wf apply · demo/run-1`, `✓ flaky .*succeeded after 3 attempts`, `✗ declined .*CardDeclined`,
		`q stop \(wf apply resumes\)`)
	if n := len(strings.Split(strings.TrimRight(f, "\n"), "\n")); n > 24 {
		t.Fatalf("frame of %d lines in a 24-line window", n)
	}
	if got := p.flag("#{mouse_button_flag}#{mouse_sgr_flag}"); got != "11" {
		t.Errorf("mouse reporting while the dashboard runs: flags %q, want button and SGR on", got)
	}

	t.Run("help overlay", func(t *testing.T) {
		p.t = t
		p.keys("?")
		p.waitFor("help", `╭─ keys`, `captured stdout/stderr of the selected attempt`, `q +stop: no new attempts`, `run reset`)
		p.keys("Escape")
		p.waitGone("help closed", `╭─ keys`)
	})

	t.Run("filter", func(t *testing.T) {
		p.t = t
		p.keys("/")
		p.text("decl")
		f := p.waitFor("filter typed", `filter "decl": 1 of 34`, `/decl▏`)
		if strings.Contains(f, " flaky ") {
			t.Fatalf("filter shows flaky:\n%s", f)
		}
		p.keys("Enter")
		p.waitFor("filter kept", `filter "decl": 1 of 34`, `q stop`)
		p.keys("Escape")
		p.waitGone("filter cleared", `filter "`)
	})

	t.Run("logs view", func(t *testing.T) {
		p.t = t
		p.keys("Home", "l")
		p.waitFor("logs of the last attempt", `activity.flaky .*attempt 3 \(3 of 3\) output`, `stdout · 20 B`, `attempt 3 on stdout`, `boom on attempt 3`)
		p.keys("Left")
		p.waitFor("logs of attempt 2", `attempt 2 · failed \(exit:1\)`, `attempt 2 on stdout`, `boom on attempt 2`)
		p.keys("Escape")
		p.waitFor("back on the dashboard", `── activities`)
	})

	t.Run("error view", func(t *testing.T) {
		p.t = t
		p.keys("Home", "Down", "e")
		f := p.waitFor("error", `activity.declined .* error`, `type +CardDeclined`, `non_retryable yes`, `reason +non_retryable`)
		// The row cuts the message; the view shows it whole, wrapped.
		if !strings.Contains(strings.Join(strings.Fields(f), " "), "another means of payment, then run wf apply again") {
			t.Fatalf("error view does not show the whole message:\n%s", f)
		}
		p.keys("Escape")
		p.waitFor("back", `── activities`)
	})

	t.Run("history", func(t *testing.T) {
		p.t = t
		p.keys("Home", "Enter")
		p.waitFor("history", `── attempts`, `1 +\d\d:\d\d:\d\d\.\d+ .*failed +exit:1`, `> 3 .*succeeded`)
		p.keys("q") // q goes back in a view, like less
		p.waitFor("back", `── activities`)
	})

	t.Run("scrolling", func(t *testing.T) {
		p.t = t
		p.keys("End")
		p.waitFor("end", `> .* step_29 `, `activities \d+-34 of 34`)
		p.keys("PageUp")
		p.waitGone("page up", `> .* step_29 `)
		p.keys("Home")
		p.waitFor("home", `> .* flaky `, `activities 1-\d+ of 34`)
		p.keys("Tab", "Up", "Up")
		p.waitFor("event log scrolled back", `events · .*2 newer below`)
		p.keys("G", "Tab")
	})

	t.Run("resize", func(t *testing.T) {
		p.t = t
		p.run("resize-window", "-t", "wf", "-x", "200", "-y", "60")
		f := p.waitFor("wide", `flaky .* ✗✗✓ +succeeded after 3 attempts`, `\d\d:\d\d:\d\d\.\d{3} activity\.`)
		for _, l := range strings.Split(f, "\n") {
			if len([]rune(l)) > 200 {
				t.Fatalf("line wider than the window: %q", l)
			}
		}
	})

	t.Run("wf watch shows the same views", func(t *testing.T) {
		w := newTmuxPane(t, 100, 30, dir, fmt.Sprintf("sh -c '%s watch -state-dir %s .; echo WATCH_EXIT=$?; sleep 30'", bin, filepath.Join(dir, "state")))
		w.waitFor("watch dashboard", `wf watch · demo/run-1`, `✓ flaky .*succeeded after 3 attempts`, `q quit \(the apply goes on\)`)
		// The attempt's output came over the event socket.
		w.keys("Home", "l")
		w.waitFor("watch logs", `attempt 3 on stdout`, `boom on attempt 3`)
		// esc and the next key within the reader's escape timeout would be
		// alt+key: wait for the dashboard first, as a person would see it.
		w.keys("Escape")
		w.waitFor("watch back on the dashboard", `── activities`)
		w.keys("q")
		w.waitFor("watch closed", `WATCH_EXIT=0`)
		p.t = t
		p.waitFor("the apply goes on", `wf apply · demo/run-1`, `hold .*running`)
	})

	t.Run("q stops and wf apply exits 130", func(t *testing.T) {
		p.t = t
		p.keys("q")
		p.waitFor("stopping", `stopping: no new attempts`)
		if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		p.waitFor("exit", `EXIT=130`)
		if got := p.flag("#{mouse_button_flag}#{mouse_sgr_flag}#{cursor_flag}"); got != "001" {
			t.Errorf("after the dashboard: mouse and cursor flags %q, want mouse off and the cursor shown", got)
		}
	})

	out, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	// What it does ask for, and turns off again: the mouse (for the wheel).
	if !strings.Contains(string(out), "\x1b[?1002h") || !strings.Contains(string(out), "\x1b[?1002l") {
		t.Errorf("the recorded output lacks mouse reporting on and off (%d bytes recorded)", len(out))
	}
	// bubbletea's renderer may flush once before the dashboard's first
	// view and switch bracketed paste on for that instant; the first view
	// switches it off at once. It must never be left on.
	if on, off := strings.LastIndex(string(out), "\x1b[?2004h"), strings.LastIndex(string(out), "\x1b[?2004l"); on > off {
		t.Errorf("bracketed paste left on (at byte %d of %d)", on, len(out))
	}
	for name, seq := range map[string]string{
		"kitty keyboard": "\x1b[>1u", "modifyOtherKeys": "\x1b[>4;", "alternate screen": "\x1b[?1049h",
	} {
		if i := strings.Index(string(out), seq); i >= 0 {
			t.Errorf("the dashboard asked the terminal for %s (%q) at byte %d of %d: %q", name, seq, i, len(out), out[max(0, i-300):min(len(out), i+100)])
		}
	}
}

// TestDashboardKilledLeavesTypingWorking kills -9 a running dashboard
// under an interactive shell and types at the shell: what is typed must
// show (no keyboard mode left on that the shell does not read).
func TestDashboardKilledLeavesTypingWorking(t *testing.T) {
	requireTmux(t)
	shell := "sh -i"
	if bash, err := exec.LookPath("bash"); err == nil {
		shell = bash + " --norc --noprofile -i"
	}
	bin := durBinary(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(tmuxWorkflow(0)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newTmuxPane(t, 80, 24, dir, shell)
	p.text(fmt.Sprintf("sh -c 'echo $$ > wf.pid; exec %s apply -auto-approve -state-dir %s .'", bin, filepath.Join(dir, "state")))
	p.keys("Enter")
	p.waitFor("dashboard", `wf apply · demo/run-1`, `q stop`)
	pid, err := os.ReadFile(filepath.Join(dir, "wf.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(string(pid), &n); err != nil {
		t.Fatal(err)
	}
	proc, err := os.FindProcess(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	p.waitFor("killed", `Killed`)
	p.text("echo typed-after-kill-$((6*7))")
	p.keys("Enter")
	p.waitFor("typing echoes and runs", `echo typed-after-kill-\$\(\(6\*7\)\)`, `typed-after-kill-42`)
	// Stop the orphaned activity the kill left behind.
	_ = os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644)
}
