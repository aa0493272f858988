package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/wf-engine/wf/config"
)

// run is the whole program behind main, with every input injectable so that
// tests drive it in-process. It returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	c := &CLI{
		Stdin:      stdin,
		Stdout:     stdout,
		Stderr:     stderr,
		Environ:    environ,
		IsTerminal: isTerminal,
		Now:        time.Now,
		Notify:     notifySignals,
	}
	return c.Run(ctx, args)
}

// CLI carries everything a command touches outside its own flags: the
// standard streams, the environment, the clock and how signals arrive.
type CLI struct {
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Environ []string
	// IsTerminal reports whether a stream is an interactive terminal; it
	// decides colour, the TUI and whether wf apply may prompt.
	IsTerminal func(v any) bool
	Now        func() time.Time
	// Notify subscribes c to SIGINT/SIGTERM; the returned func unsubscribes.
	Notify func(c chan<- os.Signal) (stop func())
	// Chdir changes the working directory for -chdir (nil: os.Chdir).
	Chdir func(dir string) error
}

// Exit codes of the contract (SPEC §6).
const (
	exitOK          = 0
	exitError       = 1
	exitChanges     = 2
	exitInterrupted = 130
)

// exitErr carries an exit code. A nil err means the reason has already been
// printed (diagnostics, a plan, a usage text) and nothing more is said.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

// exitCode ends the command with code and no further message.
func exitCode(code int) error { return &exitErr{code: code} }

// command is one subcommand.
type command interface {
	Run(ctx context.Context, args []string) error
}

// commandInfo is one entry of the command table: its name, the line
// the usage shows, and how to make it.
type commandInfo struct {
	name    string
	summary string
	main    bool // listed under "Main commands"
	make    func(c *CLI) command
}

// commands is every subcommand, in the order the usage lists them. The
// usage text, wf help and the shell completions come from it.
func commands() []commandInfo {
	return []commandInfo{
		{"validate", "Check whether the configuration is valid", true, func(c *CLI) command { return &ValidateCommand{cli: c} }},
		{"plan", "Show what wf apply would run and how it would retry", true, func(c *CLI) command { return &PlanCommand{cli: c} }},
		{"apply", "Run the workflows (resumes where a previous run stopped)", true, func(c *CLI) command { return &ApplyCommand{cli: c} }},
		{"fmt", "Rewrite *.wf.hcl files in the canonical format", false, func(c *CLI) command { return &FmtCommand{cli: c} }},
		{"graph", "Print the activity graph in DOT format", false, func(c *CLI) command { return &GraphCommand{cli: c} }},
		{"history", "Show the attempt log of an instance", false, func(c *CLI) command { return &HistoryCommand{cli: c} }},
		{"output", "Show the outputs of an instance", false, func(c *CLI) command { return &OutputCommand{cli: c} }},
		{"state", "Inspect and edit the state (list, show, rm, check)", false, func(c *CLI) command { return &StateCommand{cli: c} }},
		{"stats", "Show retry rates and error types per activity", false, func(c *CLI) command { return &StatsCommand{cli: c} }},
		{"watch", "Attach the dashboard to a running wf apply", false, func(c *CLI) command { return &WatchCommand{cli: c} }},
		{"worker", "Run a Temporal worker (with -engine temporal on the other commands)", false, func(c *CLI) command { return &WorkerCommand{cli: c} }},
		{"completion", "Print a shell completion script (bash, zsh, fish)", false, func(c *CLI) command { return &CompletionCommand{cli: c} }},
		{"version", "Show the wf version", false, func(c *CLI) command { return &VersionCommand{cli: c} }},
		{"help", "Show the help of wf or of a command", false, func(c *CLI) command { return &HelpCommand{cli: c} }},
	}
}

// findCommand returns the command named name, or nil.
func findCommand(name string) *commandInfo {
	for _, ci := range commands() {
		if ci.name == name {
			return &ci
		}
	}
	return nil
}

// Run dispatches args to a subcommand and maps its error to an exit code.
// Global options come before the command: -chdir=DIR, as in Terraform.
func (c *CLI) Run(ctx context.Context, args []string) int {
	args, err := c.globalOptions(args)
	if err != nil {
		c.printError(err)
		return exitError
	}
	if len(args) == 0 {
		fmt.Fprint(c.Stderr, usageText())
		return exitError
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		fmt.Fprint(c.Stdout, usageText())
		return exitOK
	case "-version", "--version", "-v":
		name = "version"
	}
	ci := findCommand(name)
	if ci == nil {
		fmt.Fprintf(c.Stderr, "Error: wf has no command %q.%s\nRun \"wf -help\" for the list of commands.\n", name, didYouMean(name, commandNames()))
		return exitError
	}
	return c.exit(ci.make(c).Run(ctx, args[1:]))
}

// globalOptions applies the options that come before the command and
// returns the arguments after them.
func (c *CLI) globalOptions(args []string) ([]string, error) {
	for len(args) > 0 {
		a := args[0]
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "chdir" {
			return args, nil
		}
		if !hasValue {
			if len(args) < 2 {
				return nil, errors.New("-chdir needs a directory: wf -chdir=DIR COMMAND")
			}
			value, args = args[1], args[1:]
		}
		if value == "" {
			return nil, errors.New("-chdir needs a directory: wf -chdir=DIR COMMAND")
		}
		chdir := c.Chdir
		if chdir == nil {
			chdir = os.Chdir
		}
		if err := chdir(value); err != nil {
			return nil, fmt.Errorf("-chdir=%s: %w", value, err)
		}
		args = args[1:]
	}
	return args, nil
}

// exit prints err (unless it is silent) and returns its exit code.
func (c *CLI) exit(err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ee *exitErr
	if errors.As(err, &ee) {
		if ee.err != nil {
			c.printError(ee.err)
		}
		return ee.code
	}
	c.printError(err)
	return exitError
}

func (c *CLI) printError(err error) {
	fmt.Fprintf(c.Stderr, "Error: %s\n", err)
}

// usageText is the help of wf itself, from the command table.
func usageText() string {
	var b strings.Builder
	b.WriteString(`Usage: wf [global options] [command] [options] [args]

wf runs declarative workflows described in *.wf.hcl files, retrying each
activity under its retry policy and keeping every attempt and timer durable.

Main commands:
`)
	line := func(ci commandInfo) { fmt.Fprintf(&b, "  %-11s %s\n", ci.name, ci.summary) }
	for _, ci := range commands() {
		if ci.main {
			line(ci)
		}
	}
	b.WriteString("\nOther commands:\n")
	for _, ci := range commands() {
		if !ci.main {
			line(ci)
		}
	}
	b.WriteString(`
Global options (before the command):
  -chdir=DIR  Switch to DIR before running the command

Flags take one dash or two and may come before or after the positional
arguments. Run "wf help COMMAND" or "wf COMMAND -h" for the flags of a
command.
`)
	return b.String()
}

// newFlagSet returns a flag set whose -h prints usage (a "Usage: ..." line
// and a description) followed by the flags.
func (c *CLI) newFlagSet(name, usage, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("wf "+name, flag.ContinueOnError)
	fs.SetOutput(c.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.Stderr, "Usage: %s\n\n%s\n", usage, strings.TrimRight(help, "\n")+"\n")
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(c.Stderr, "\nOptions:\n\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// commandNames are the commands wf knows, for suggestions.
func commandNames() []string {
	var names []string
	for _, ci := range commands() {
		names = append(names, ci.name)
	}
	return names
}

// didYouMean is ` Did you mean "x"?` for the closest name, or "".
func didYouMean(name string, names []string) string {
	if s := config.Suggest(name, names); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

// parseArgs parses flags wherever they appear among the positional
// arguments, so that both `wf plan -no-color dir` and `wf plan dir
// -no-color` work. A "--" ends flag parsing; everything after it is
// positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseFlags is fs.Parse with wf's errors: a flag mistake is said once,
// with the closest flag when one is close (`-auto-aprove`: Did you mean
// -auto-approve?) and where to find the others, without the whole usage;
// -h prints the usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg = fmt.Sprintf("%s has no flag -%s.", fs.Name(), name)
		if s := config.Suggest(name, names); s != "" {
			msg += fmt.Sprintf(" Did you mean -%s?", s)
		}
	}
	fmt.Fprintf(out, "Error: %s\nRun \"%s -h\" for its flags.\n", msg, fs.Name())
	return exitCode(exitError)
}

// usageErr reports a wrong number of positional arguments.
func usageErr(fs *flag.FlagSet, format string, a ...any) error {
	fmt.Fprintf(fs.Output(), "Error: %s\n\n", fmt.Sprintf(format, a...))
	fs.Usage()
	return exitCode(exitError)
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// getenv looks a variable up in the injected environment (the last
// definition wins, as in the process environment).
func (c *CLI) getenv(key string) string {
	v := ""
	prefix := key + "="
	for _, kv := range c.Environ {
		if strings.HasPrefix(kv, prefix) {
			v = kv[len(prefix):]
		}
	}
	return v
}

// color decides whether output to w is coloured: never with -no-color or a
// non-empty NO_COLOR, and only when w is a terminal.
func (c *CLI) color(w io.Writer, noColor bool) bool {
	if noColor || c.getenv("NO_COLOR") != "" {
		return false
	}
	return c.IsTerminal(w)
}

func (c *CLI) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// isTerminal reports whether v is a file attached to a terminal.
func isTerminal(v any) bool {
	f, ok := v.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	return term.IsTerminal(f.Fd())
}

// dirArg returns the single optional DIR argument (default ".").
func dirArg(fs *flag.FlagSet, positional []string) (string, error) {
	switch len(positional) {
	case 0:
		return ".", nil
	case 1:
		return positional[0], nil
	default:
		return "", usageErr(fs, "too many arguments: %s", strings.Join(positional[1:], " "))
	}
}

// parseDir parses the flags of a command whose only positional argument is
// an optional DIR (default ".") and returns that argument.
func parseDir(fs *flag.FlagSet, args []string) (string, error) {
	positional, err := parseArgs(fs, args)
	if err != nil {
		return "", err
	}
	return dirArg(fs, positional)
}

// parseConfigDir is parseDir for a DIR that must be an existing
// directory. It returns DIR as typed, which keeps the file names in
// diagnostics short, and its absolute path.
func parseConfigDir(fs *flag.FlagSet, args []string) (dir, abs string, err error) {
	dir, err = parseDir(fs, args)
	if err != nil {
		return "", "", err
	}
	abs, err = absDir(dir)
	if err != nil {
		return "", "", err
	}
	return dir, abs, nil
}

// parseInstance parses the flags of a command whose positional arguments
// are an INSTANCE address (WORKFLOW/KEY) followed by at most maxRest more,
// and returns the address split and the arguments after it.
func parseInstance(fs *flag.FlagSet, args []string, maxRest int) (workflow, key string, rest []string, err error) {
	positional, err := parseArgs(fs, args)
	if err != nil {
		return "", "", nil, err
	}
	if len(positional) == 0 {
		// The flag set is named after the command: "wf state show".
		return "", "", nil, usageErr(fs, "%s needs an INSTANCE address", fs.Name())
	}
	rest = positional[1:]
	if len(rest) > maxRest {
		return "", "", nil, usageErr(fs, "too many arguments: %s", strings.Join(rest[maxRest:], " "))
	}
	workflow, key, err = splitInstance(positional[0])
	if err != nil {
		return "", "", nil, err
	}
	return workflow, key, rest, nil
}

// parseInstanceDir parses `INSTANCE [DIR]` (DIR defaults to ".").
func parseInstanceDir(fs *flag.FlagSet, args []string) (workflow, key, dir string, err error) {
	workflow, key, rest, err := parseInstance(fs, args, 1)
	if err != nil {
		return "", "", "", err
	}
	// rest holds at most one argument, so dirArg only supplies the default.
	dir, err = dirArg(fs, rest)
	if err != nil {
		return "", "", "", err
	}
	return workflow, key, dir, nil
}

// absDir resolves a configuration directory and checks that it exists.
func absDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("configuration directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("configuration directory: %s is not a directory", dir)
	}
	return abs, nil
}
