package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// result is what one in-process wf invocation produced.
type result struct {
	code           int
	stdout, stderr string
}

// invocation describes one wf run in a test.
type invocation struct {
	args  []string
	env   []string // added to the base environment
	stdin string
	// terminal makes every stream look like a terminal (colour, TUI, prompt).
	terminal bool
}

// baseEnv is the environment of every test run: enough for /bin/sh scripts,
// nothing of the developer's own (no NO_COLOR, no WF_*).
func baseEnv(t *testing.T) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
}

func (inv invocation) run(t *testing.T) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var code int
	if !inv.terminal {
		code = run(ctx, inv.args, strings.NewReader(inv.stdin), &stdout, &stderr, append(baseEnv(t), inv.env...))
	} else {
		c := &CLI{
			Stdin: strings.NewReader(inv.stdin), Stdout: &stdout, Stderr: &stderr,
			Environ:    append(baseEnv(t), inv.env...),
			IsTerminal: func(any) bool { return true },
			Now:        time.Now,
		}
		code = c.Run(ctx, inv.args)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wf runs wf with args and no extra environment.
func wf(t *testing.T, args ...string) result {
	t.Helper()
	return invocation{args: args}.run(t)
}

// writeConfig writes files (name -> content) into a fresh directory.
func writeConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
// dir is replaced by $DIR so that golden files do not depend on temp paths.
func checkGolden(t *testing.T, name, got, dir string) {
	t.Helper()
	if dir != "" {
		got = strings.ReplaceAll(got, dir, "$DIR")
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		noStdout bool
	}{
		{name: "no args", args: nil, code: 1, stderr: "Usage: wf"},
		{name: "help", args: []string{"-h"}, code: 0, stdout: "Main commands:"},
		{name: "double dash help", args: []string{"--help"}, code: 0, stdout: "watch"},
		{name: "unknown", args: []string{"frobnicate"}, code: 1, stderr: `wf has no command "frobnicate".` + "\nRun \"wf -help\" for the list of commands.\n"},
		{name: "command help", args: []string{"plan", "-h"}, code: 0, stderr: "-detailed-exitcode"},
		{name: "unknown flag", args: []string{"plan", "-bogus"}, code: 1, stderr: "Error: wf plan has no flag -bogus.\nRun \"wf plan -h\" for its flags.\n"},
		{name: "state usage", args: []string{"state"}, code: 1, stderr: "Subcommands:"},
		{name: "state unknown", args: []string{"state", "mv"}, code: 1, stderr: `wf state has no subcommand "mv".`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := wf(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.stdout) {
				t.Errorf("stdout %q does not contain %q", r.stdout, tt.stdout)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tt.stderr)
			}
		})
	}
	// Every command is listed.
	r := wf(t, "help")
	for _, cmd := range []string{"validate", "plan", "apply", "fmt", "graph", "history", "state", "stats", "watch", "version"} {
		if !strings.Contains(r.stdout, "\n  "+cmd+" ") {
			t.Errorf("usage does not list %s:\n%s", cmd, r.stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := wf(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "wf "+version+"\n") || !strings.Contains(r.stdout, "go1.") {
			t.Errorf("wf %v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
	if r := wf(t, "version", "extra"); r.code != 1 {
		t.Errorf("wf version extra: exit %d, want 1", r.code)
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		positional []string
		out        string
		check      bool
	}{
		{name: "flags first", args: []string{"-out", "p", "-check", "dir"}, positional: []string{"dir"}, out: "p", check: true},
		{name: "flags last", args: []string{"dir", "--out=p", "--check"}, positional: []string{"dir"}, out: "p", check: true},
		{name: "interleaved", args: []string{"a", "-check", "b", "-out", "p", "c"}, positional: []string{"a", "b", "c"}, out: "p", check: true},
		{name: "double dash", args: []string{"-check", "--", "-out", "x"}, positional: []string{"-out", "x"}, check: true},
		{name: "none", args: nil, positional: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			out := fs.String("out", "", "")
			check := fs.Bool("check", false, "")
			got, err := parseArgs(fs, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tt.positional, "|") || *out != tt.out || *check != tt.check {
				t.Errorf("positional %q out %q check %v; want %q %q %v", got, *out, *check, tt.positional, tt.out, tt.check)
			}
		})
	}
}

// TestDidYouMeanOnTheCommandLine: a mistyped command, subcommand or flag
// is said once, with the closest name, and no usage dump.
func TestDidYouMeanOnTheCommandLine(t *testing.T) {
	dir := writeConfig(t, map[string]string{"main.wf.hcl": "workflow \"w\" {\n  activity \"fetch\" {\n    exec { command = [\"true\"] }\n  }\n}\n"})
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"aply"}, "Error: wf has no command \"aply\". Did you mean \"apply\"?\nRun \"wf -help\" for the list of commands.\n"},
		{[]string{"apply", "-auto-aprove", dir}, "Error: wf apply has no flag -auto-aprove. Did you mean -auto-approve?\nRun \"wf apply -h\" for its flags.\n"},
		{[]string{"plan", "--detailed-exitcod", dir}, "Error: wf plan has no flag -detailed-exitcod. Did you mean -detailed-exitcode?\nRun \"wf plan -h\" for its flags.\n"},
		{[]string{"state", "lst"}, "Error: wf state has no subcommand \"lst\". Did you mean \"list\"?"},
		{[]string{"plan", "-replace=activity.fetc", dir}, "-replace=activity.fetc does not name an activity of the planned workflows. Did you mean activity.fetch?"},
		{[]string{"plan", "-workflow", "ww", dir}, "Did you mean"},
	}
	for _, tt := range tests {
		r := wf(t, tt.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("wf %v: exit %d, stderr %q, want %q", tt.args, r.code, r.stderr, tt.stderr)
		}
		if n := strings.Count(r.stderr, "Did you mean"); n != 1 {
			t.Errorf("wf %v said Did you mean %d times:\n%s", tt.args, n, r.stderr)
		}
		if strings.Contains(r.stderr, "Usage:") && tt.args[0] != "state" {
			t.Errorf("wf %v printed the usage:\n%s", tt.args, r.stderr)
		}
	}
}
