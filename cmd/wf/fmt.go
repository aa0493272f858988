package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wf-engine/wf/config"
)

// FmtCommand rewrites configuration files in the canonical format.
type FmtCommand struct {
	cli       *CLI
	check     bool
	diff      bool
	recursive bool
	noColor   bool
}

// Run implements `wf fmt [-check] [-diff] [-recursive] [DIR | FILE | -]`.
func (cmd *FmtCommand) Run(_ context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("fmt", "wf fmt [options] [DIR | FILE | -]",
		"Rewrite every *.wf.hcl and *.auto.wfvars file in DIR (default \".\"; with\n-recursive, its subdirectories too, except hidden ones such as .wf) in the\ncanonical format and list the files it changed. With a FILE, format only\nthat file; with -, format stdin to stdout.")
	fs.BoolVar(&cmd.check, "check", false, "write nothing; list the files that are not formatted and exit 1 if there are any")
	fs.BoolVar(&cmd.diff, "diff", false, "print the changes as a unified diff")
	fs.BoolVar(&cmd.recursive, "recursive", false, "also format the files in subdirectories")
	fs.BoolVar(&cmd.noColor, "no-color", false, "disable colour in diagnostics")
	target, err := parseDir(fs, args)
	if err != nil {
		return err
	}
	if target == "-" {
		return cmd.formatStdin()
	}
	files, err := fmtTargets(target, cmd.recursive)
	if err != nil {
		return err
	}
	failed, changed := false, false
	for _, name := range files {
		ok, diff, err := cmd.formatFile(name)
		if err != nil {
			return err
		}
		if !ok {
			failed = true
			continue
		}
		if diff {
			changed = true
			fmt.Fprintln(c.Stdout, name)
		}
	}
	if failed || (cmd.check && changed) {
		return exitCode(exitError)
	}
	return nil
}

// fmtTargets lists the files to format: target itself when it is a file,
// else the configuration and variable files in the directory (and, with
// recursive, in its subdirectories but hidden ones), sorted.
func fmtTargets(target string, recursive bool) ([]string, error) {
	fi, err := os.Stat(target)
	if err != nil {
		return nil, fmt.Errorf("fmt: %w", err)
	}
	if !fi.IsDir() {
		return []string{target}, nil
	}
	entries, err := os.ReadDir(target)
	if err != nil {
		return nil, fmt.Errorf("fmt: read directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".wf.hcl") || strings.HasSuffix(n, ".auto.wfvars")) {
			files = append(files, filepath.Join(target, n))
		}
	}
	sort.Strings(files)
	if !recursive {
		return files, nil
	}
	for _, e := range entries {
		// Hidden directories are a state (.wf), a repository (.git) or a
		// tool's: never configuration. Links are not followed.
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		more, err := fmtTargets(filepath.Join(target, e.Name()), true)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

// formatFile formats one file. ok is false when the file has syntax errors
// (already printed); changed says whether it was (or, with -check, would
// be) rewritten.
func (cmd *FmtCommand) formatFile(name string) (ok, changed bool, err error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return false, false, fmt.Errorf("fmt: %w", err)
	}
	out, diags := config.Format(src, name)
	if diags.HasErrors() {
		if err := config.WriteDiagnostics(cmd.cli.Stderr, diags, map[string][]byte{name: src}, cmd.cli.color(cmd.cli.Stderr, cmd.noColor)); err != nil {
			return false, false, fmt.Errorf("write diagnostics: %w", err)
		}
		return false, false, nil
	}
	if bytes.Equal(src, out) {
		return true, false, nil
	}
	if cmd.diff {
		writeUnifiedDiff(cmd.cli.Stdout, name, src, out)
	}
	if cmd.check {
		return true, true, nil
	}
	fi, err := os.Stat(name)
	if err != nil {
		return false, false, fmt.Errorf("fmt: %w", err)
	}
	if err := os.WriteFile(name, out, fi.Mode().Perm()); err != nil {
		return false, false, fmt.Errorf("fmt: write %s: %w", name, err)
	}
	return true, true, nil
}

func (cmd *FmtCommand) formatStdin() error {
	src, err := io.ReadAll(cmd.cli.Stdin)
	if err != nil {
		return fmt.Errorf("fmt: read stdin: %w", err)
	}
	out, diags := config.Format(src, "<stdin>")
	if diags.HasErrors() {
		if err := config.WriteDiagnostics(cmd.cli.Stderr, diags, map[string][]byte{"<stdin>": src}, cmd.cli.color(cmd.cli.Stderr, cmd.noColor)); err != nil {
			return fmt.Errorf("write diagnostics: %w", err)
		}
		return exitCode(exitError)
	}
	if cmd.diff {
		if !bytes.Equal(src, out) {
			writeUnifiedDiff(cmd.cli.Stdout, "<stdin>", src, out)
		}
		if cmd.check && !bytes.Equal(src, out) {
			return exitCode(exitError)
		}
		return nil
	}
	if cmd.check {
		if !bytes.Equal(src, out) {
			return exitCode(exitError)
		}
		return nil
	}
	if _, err := cmd.cli.Stdout.Write(out); err != nil {
		return fmt.Errorf("fmt: write stdout: %w", err)
	}
	return nil
}
