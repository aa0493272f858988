package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
)

// HelpCommand prints the help of wf or of one command.
type HelpCommand struct {
	cli *CLI
}

// Run implements `wf help [COMMAND [SUBCOMMAND]]`.
func (cmd *HelpCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	if len(args) == 0 {
		fmt.Fprint(c.Stdout, usageText())
		return nil
	}
	ci := findCommand(args[0])
	if ci == nil || ci.name == "help" {
		fmt.Fprintf(c.Stderr, "wf help: unknown command %q\n\n%s", args[0], usageText())
		return exitCode(exitError)
	}
	// The command prints its own usage for -h, on stderr; asked for, it
	// belongs on stdout (wf help plan | less).
	sub := *c
	sub.Stderr = c.Stdout
	return ci.make(&sub).Run(ctx, append(append([]string{}, args[1:]...), "-h"))
}

// flagLine is a flag as flag.PrintDefaults prints it: "  -name value".
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)

// commandFlags lists the flags of a command (path is "plan" or "state",
// "show") as its -h prints them, without the dash.
func commandFlags(path ...string) []string {
	var out bytes.Buffer
	c := &CLI{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, IsTerminal: func(any) bool { return false }}
	ci := findCommand(path[0])
	if ci == nil {
		return nil
	}
	_ = ci.make(c).Run(context.Background(), append(append([]string{}, path[1:]...), "-h"))
	var flags []string
	for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// stateSubcommands are the subcommands of wf state.
var stateSubcommands = []string{"list", "show", "rm", "check"}
