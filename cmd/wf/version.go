package main

import (
	"context"
	"fmt"
	"runtime"
)

// version is the release; builds override it with
// -ldflags "-X main.version=v1.2.3".
var version = "v0.1.0"

// VersionCommand prints the version of wf and of the Go toolchain.
type VersionCommand struct {
	cli  *CLI
	json bool
}

// Run implements `wf version`.
func (cmd *VersionCommand) Run(_ context.Context, args []string) error {
	fs := cmd.cli.newFlagSet("version", "wf version [-json]", "Show the version of wf.")
	fs.BoolVar(&cmd.json, "json", false, "print one JSON document (documented in docs/commands.md)")
	positional, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return usageErr(fs, "wf version takes no arguments")
	}
	if cmd.json {
		return writeJSON(cmd.cli.Stdout, "version", versionDoc{
			FormatVersion: jsonFormatVersion,
			Version:       version,
			GoVersion:     runtime.Version(),
			Platform:      runtime.GOOS + "_" + runtime.GOARCH,
		})
	}
	fmt.Fprintf(cmd.cli.Stdout, "wf %s\n%s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
