package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/planner"
)

// ValidateCommand loads a configuration and builds the graph of every
// workflow, so that dependency cycles are reported too.
type ValidateCommand struct {
	cli   *CLI
	flags commonFlags
	json  bool
}

// Run implements `wf validate [DIR]`.
func (cmd *ValidateCommand) Run(_ context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("validate", "wf validate [options] [DIR]",
		"Check that the configuration in DIR (default \".\") is valid: syntax,\nattributes, references, durations, retry policies and dependency cycles.")
	cmd.flags.register(fs)
	fs.BoolVar(&cmd.json, "json", false, "print the result and every diagnostic, with its range, as one JSON document (documented in docs/commands.md)")
	dir, _, err := parseConfigDir(fs, args)
	if err != nil {
		return err
	}
	cfg, diags := loadWithChecks(dir, cmd.flags.loadOptions(c.Environ))
	if cfg != nil && !diags.HasErrors() {
		selected, err := selectWorkflow(cfg, cmd.flags.workflow)
		if err != nil {
			return err
		}
		for _, wf := range selected.Workflows {
			_, gdiags := planner.BuildGraph(wf)
			diags = append(diags, gdiags...)
		}
	}
	if cmd.json {
		doc := newValidateDoc(diags)
		if err := writeJSON(c.Stdout, "validate", doc); err != nil {
			return err
		}
		if !doc.Valid || cfg == nil {
			return exitCode(exitError)
		}
		return nil
	}
	if err := c.writeDiags(diags, cfg, cmd.flags.noColor); err != nil {
		return err
	}
	if diags.HasErrors() || cfg == nil {
		return exitCode(exitError)
	}
	fmt.Fprintln(c.Stdout, successLine(diags))
	return nil
}

func successLine(diags hcl.Diagnostics) string {
	warnings := 0
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			warnings++
		}
	}
	switch warnings {
	case 0:
		return "Success! The configuration is valid."
	case 1:
		return "Success! The configuration is valid, but there was 1 warning."
	default:
		return fmt.Sprintf("Success! The configuration is valid, but there were %d warnings.", warnings)
	}
}
