package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestChdir: -chdir=DIR (or -chdir DIR) before the command runs it in
// DIR, as Terraform does. It runs the binary: -chdir changes the working
// directory of the whole process.
func TestChdir(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	for _, args := range [][]string{{"-chdir=" + dir, "plan"}, {"-chdir", dir, "plan", "-no-color"}, {"--chdir=" + dir, "validate"}} {
		cmd := exec.Command(durBinary(t), args...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil || !(strings.Contains(string(out), "Plan: 2 to run") || strings.Contains(string(out), "Success!")) {
			t.Errorf("wf %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(durBinary(t), "-chdir="+filepath.Join(dir, "nope"), "plan").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "-chdir=") {
		t.Errorf("-chdir to a missing directory: %v\n%s", err, out)
	}
}

func TestHelpCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help"}, 0, "Global options"},
		{[]string{"help", "plan"}, 0, "-detailed-exitcode"},
		{[]string{"help", "state", "show"}, 0, "-full"},
		{[]string{"help", "state"}, 0, "Subcommands:"},
		{[]string{"help", "nope"}, 1, ""},
	} {
		r := wf(t, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stdout, tt.want) {
			t.Errorf("wf %s: exit %d (want %d), stdout lacks %q:\n%s%s", strings.Join(tt.args, " "), r.code, tt.code, tt.want, r.stdout, r.stderr)
		}
	}
}

// TestCompletionBash drives the bash script as bash's completion does.
func TestCompletionBash(t *testing.T) {
	r := wf(t, "completion", "bash")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	script := filepath.Join(t.TempDir(), "wf.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		words string
		want  string
	}{
		{"wf pl", "plan"},
		{"wf plan -detailed", "-detailed-exitcode"},
		{"wf apply -auto", "-auto-approve"},
		{"wf state s", "show"},
		{"wf state show -fu", "-full"},
		{"wf history -js", "-json"},
		{"wf fmt -rec", "-recursive"},
		{"wf completion f", "fish"},
		{"wf help st", "state stats"},
	} {
		words := strings.Fields(tt.words)
		line := `source "$1"; COMP_WORDS=(` + strings.Join(words, " ") + `); COMP_CWORD=` + strconv.Itoa(len(words)-1) + `; _wf; echo "${COMPREPLY[*]}"`
		out, err := exec.Command("bash", "-c", line, "bash", script).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tt.want {
			t.Errorf("completing %q: %q (%v), want %q", tt.words, out, err, tt.want)
		}
	}
}

// TestCompletionZshFish: the scripts name every command and flag; they
// are checked by the shells themselves where installed.
func TestCompletionZshFish(t *testing.T) {
	for _, shell := range []string{"zsh", "fish"} {
		r := wf(t, "completion", shell)
		if r.code != 0 {
			t.Fatalf("wf completion %s: exit %d: %s", shell, r.code, r.stderr)
		}
		for _, want := range []string{"plan", "detailed-exitcode", "auto-approve", "recursive", "chdir"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s script lacks %q", shell, want)
			}
		}
		if path, err := exec.LookPath(shell); err == nil {
			cmd := exec.Command(path, "-n")
			cmd.Stdin = strings.NewReader(r.stdout)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		}
	}
	if r := wf(t, "completion", "tcsh"); r.code != 1 {
		t.Errorf("wf completion tcsh: exit %d, want 1", r.code)
	}
}

// TestInputFalse: -input=false is accepted, and wf apply then never asks.
func TestInputFalse(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": simpleConfig})
	if r := wf(t, "plan", "-input=false", dir); r.code != 0 {
		t.Errorf("plan -input=false: exit %d: %s", r.code, r.stderr)
	}
	r := invocation{args: []string{"apply", "-input=false", dir}, terminal: true, stdin: "yes\n"}.run(t)
	if r.code != 1 || !strings.Contains(r.stderr, "-input=false needs -auto-approve") {
		t.Errorf("apply -input=false at a terminal: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := wf(t, "apply", "-input=false", "-auto-approve", dir); r.code != 0 {
		t.Errorf("apply -input=false -auto-approve: exit %d: %s", r.code, r.stderr)
	}
}

// TestNoConfigurationFiles: plan and apply in a directory without any
// *.wf.hcl fail as Terraform does, and apply creates no state there; a
// workflow without activities is a warning.
func TestNoConfigurationFiles(t *testing.T) {
	dir := writeConfig(t, map[string]string{"notes.txt": "not a workflow\n"})
	for _, args := range [][]string{{"plan", dir}, {"apply", "-auto-approve", dir}} {
		r := wf(t, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "No configuration files in "+dir) {
			t.Errorf("wf %s: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".wf")); !os.IsNotExist(err) {
		t.Errorf("wf apply created a state where there is no configuration (stat: %v)", err)
	}
	empty := writeConfig(t, map[string]string{"main.wf.hcl": "workflow \"w\" {\n  key = \"k\"\n}\n"})
	for _, args := range [][]string{{"validate", empty}, {"plan", empty}} {
		r := wf(t, args...)
		if r.code != 0 || !strings.Contains(r.stderr, "Warning: Workflow has no activities") {
			t.Errorf("wf %s of a workflow without activities: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
	}
}
