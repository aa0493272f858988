package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The commands the documentation shows must work as written (issue #13):
// every `wf` (or `go run ./cmd/wf`) line of a shell block in README.md,
// docs/ and the examples' READMEs names a real command with real flags,
// the commands of the examples' READMEs (run from the repository root)
// name the directory they work on, and those that change nothing
// (validate, plan, graph, fmt -check) are run from the repository root
// and must succeed.

// docCommand is one wf invocation found in the documentation.
type docCommand struct {
	file string
	line int
	args []string // after "wf"
	// inline: a code span in prose, which names a command (checked) but
	// is not a line to run (not run, its directory not required).
	inline bool
}

// shellFence opens a shell code block.
var shellFence = regexp.MustCompile("^\\s*```(sh|bash|shell|console|sh-session)\\s*$")

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// docFiles are the documents whose commands are checked.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// docCommands extracts the wf invocations of a document: every line of
// its shell blocks (only the "$ " lines of a block that has some: the
// others are output), and inline code spans that start with wf or go run
// ./cmd/wf (inline is set on those).
func docCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		n    int
		text string
	}
	var out []docCommand
	var block []line
	in, plain, skipping := false, false, false
	flush := func() {
		// A plain block (no language) is output, except its "$ " lines.
		prompted := plain
		for _, l := range block {
			prompted = prompted || strings.HasPrefix(strings.TrimSpace(l.text), "$ ")
		}
		pending, start := "", 0
		for _, l := range block {
			text := strings.TrimSpace(l.text)
			if prompted {
				if !strings.HasPrefix(text, "$ ") && pending == "" {
					continue
				}
				text = strings.TrimPrefix(text, "$ ")
			}
			if pending == "" {
				start = l.n
			}
			if strings.HasSuffix(text, "\\") {
				pending += strings.TrimSuffix(text, "\\") + " "
				continue
			}
			out = append(out, invocations(path, start, pending+text, false)...)
			pending = ""
		}
		block = nil
	}
	for i, text := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(text), "```") {
			if in {
				if !skipping {
					flush()
				}
				in, skipping = false, false
				block = nil
				continue
			}
			plain = strings.TrimSpace(text) == "```"
			in = plain || shellFence.MatchString(text)
			if !in {
				// Another language: skip to its closing fence.
				in, plain = true, true
				block = nil
				skipping = true
			}
			continue
		}
		if in {
			if !skipping {
				block = append(block, line{i + 1, text})
			}
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(text, -1) {
			if strings.HasPrefix(m[1], "wf ") || strings.HasPrefix(m[1], "go run ./cmd/wf ") {
				out = append(out, invocations(path, i+1, m[1], true)...)
			}
		}
	}
	return out
}

// inlineCode is a code span.
var inlineCode = regexp.MustCompile("`([^`]+)`")

// invocations are the wf commands of one command line.
func invocations(path string, n int, full string, inline bool) []docCommand {
	var out []docCommand
	if i := strings.Index(full, " #"); i >= 0 {
		full = full[:i]
	}
	for _, seg := range regexp.MustCompile(`\s*(?:\|\||&&|\||;|\$\(|\))\s*`).Split(full, -1) {
		words := shellWords(seg)
		// Leading VAR=value assignments, then wf or go run ./cmd/wf.
		for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
			words = words[1:]
		}
		run := false
		switch {
		case len(words) >= 3 && words[0] == "go" && words[1] == "run" && (words[2] == "./cmd/wf" || words[2] == "github.com/wf-engine/wf/cmd/wf"):
			words, run = words[3:], true
		case len(words) >= 1 && (words[0] == "wf" || words[0] == "./wf"):
			words = words[1:]
		default:
			continue
		}
		out = append(out, docCommand{file: path, line: n, args: words, inline: inline && !run})
	}
	return out
}

// shellWords splits a command line as sh would, for the quoting the docs
// use ('...' and "...").
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'' || ch == '"':
			j := strings.IndexByte(s[i+1:], ch)
			if j < 0 {
				j = len(s) - i - 1
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// flagSpec is a command's flags: whether each takes a value.
func flagSpec(path ...string) map[string]bool {
	var out strings.Builder
	c := &CLI{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, IsTerminal: func(any) bool { return false }}
	ci := findCommand(path[0])
	if ci == nil {
		return nil
	}
	_ = ci.make(c).Run(context.Background(), append(append([]string{}, path[1:]...), "-h"))
	spec := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)( \S+)?`).FindAllStringSubmatch(out.String(), -1) {
		spec[m[1]] = m[2] != ""
	}
	return spec
}

func TestDocumentedCommands(t *testing.T) {
	root := repoRoot(t)
	total, ran := 0, 0
	for _, file := range docFiles(t, root) {
		rel, _ := filepath.Rel(root, file)
		isExample := strings.HasPrefix(rel, "examples"+string(filepath.Separator))
		for _, dc := range docCommands(t, file) {
			total++
			where := rel + ":" + strconv.Itoa(dc.line) + ": wf " + strings.Join(dc.args, " ")
			if checkDocCommand(t, root, where, dc.args, isExample && !dc.inline, !dc.inline) {
				ran++
			}
		}
	}
	if total < 50 || ran < 5 {
		t.Fatalf("found %d documented wf commands and ran %d: the extraction is broken", total, ran)
	}
	t.Logf("%d documented commands checked, %d run", total, ran)
}

// checkDocCommand checks one documented invocation and, when it changes
// nothing, runs it from the repository root.
func checkDocCommand(t *testing.T, root, where string, args []string, isExample, runIt bool) (ran bool) {
	t.Helper()
	chdir := ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, value, ok := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if name != "chdir" {
			if name == "h" || name == "help" || name == "version" || name == "v" {
				return false
			}
			t.Errorf("%s: unknown global option %s", where, args[0])
			return false
		}
		if !ok && len(args) > 1 {
			value, args = args[1], args[1:]
		}
		chdir, args = value, args[1:]
	}
	if len(args) == 0 {
		return false // "wf" alone prints the usage
	}
	if placeholder.MatchString(args[0]) {
		return false // "wf COMMAND -h"
	}
	path := []string{args[0]}
	ci := findCommand(args[0])
	if ci == nil {
		t.Errorf("%s: no command %q", where, args[0])
		return false
	}
	rest := args[1:]
	if args[0] == "state" || (args[0] == "help" && len(rest) > 0) {
		if args[0] == "help" {
			if !placeholder.MatchString(rest[0]) && !strings.ContainsAny(rest[0], "<>[]") && findCommand(rest[0]) == nil {
				t.Errorf("%s: wf help of no command %q", where, rest[0])
			}
			return false
		}
		if len(rest) == 0 {
			return false
		}
		if !contains(stateSubcommands, rest[0]) {
			t.Errorf("%s: no subcommand state %q", where, rest[0])
			return false
		}
		path = append(path, rest[0])
		rest = rest[1:]
	}
	spec := flagSpec(path...)
	var positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takesValue, ok := spec[name]
		if !ok {
			if name != "h" && name != "help" {
				t.Errorf("%s: wf %s has no flag -%s", where, strings.Join(path, " "), name)
			}
			continue
		}
		if takesValue && !hasValue {
			i++
		}
	}
	// Placeholders (DIR, INSTANCE, <...>, ...) are not run.
	for _, p := range positional {
		if strings.ContainsAny(p, "<>[]…") || placeholder.MatchString(p) || strings.Contains(p, "...") {
			return false
		}
	}
	dirNamed := chdir != ""
	for _, p := range positional {
		if fi, err := os.Stat(filepath.Join(root, p)); err == nil && fi.IsDir() {
			dirNamed = true
		}
	}
	needsDir := map[string]bool{"validate": true, "plan": true, "apply": true, "graph": true, "history": true, "stats": true, "state": true, "watch": true, "worker": true, "fmt": true}
	if isExample && needsDir[path[0]] && !dirNamed && !contains(positional, "-") {
		t.Errorf("%s: run from the repository root, this command needs the example's directory (or -chdir=DIR)", where)
		return false
	}
	runnable := map[string]bool{"validate": true, "plan": true, "graph": true}
	if path[0] == "fmt" && (contains(rest, "-check") || contains(rest, "--check")) {
		runnable["fmt"] = true
	}
	if !runIt || !runnable[path[0]] || !dirNamed {
		return false
	}
	if contains(rest, "-out") || strings.Contains(strings.Join(rest, " "), "-out=") || contains(rest, "-engine") {
		return false // writes a file, or needs a Temporal server
	}
	full := args
	if chdir != "" {
		full = append([]string{"-chdir=" + chdir}, args...)
	}
	cmd := exec.Command(durBinary(t), full...)
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1", "WF_STATE_DIR=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && path[0] == "plan" && ee.ExitCode() == exitChanges && contains(rest, "-detailed-exitcode") {
		err = nil
	}
	if err != nil {
		t.Errorf("%s: as written from the repository root: %v\n%s", where, err, out)
	}
	return true
}

// placeholder is a word the reader replaces: DIR, INSTANCE, FILE.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z_]*$`)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
