package main

import (
	"context"
	"fmt"

	"github.com/wf-engine/wf/planner"
)

// GraphCommand prints the activity graph in Graphviz DOT.
type GraphCommand struct {
	cli   *CLI
	flags commonFlags
}

// Run implements `wf graph [DIR]`.
func (cmd *GraphCommand) Run(_ context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("graph", "wf graph [options] [DIR]",
		"Print the activity graph of the configuration in DIR as Graphviz DOT,\ne.g. wf graph | dot -Tsvg > graph.svg")
	cmd.flags.register(fs)
	dir, _, err := parseConfigDir(fs, args)
	if err != nil {
		return err
	}
	cfg, err := c.loadConfig(dir, cmd.flags.loadOptions(c.Environ), cmd.flags.noColor)
	if err != nil {
		return err
	}
	cfg, err = selectWorkflow(cfg, cmd.flags.workflow)
	if err != nil {
		return err
	}
	if err := planner.WriteDOT(c.Stdout, cfg); err != nil {
		return fmt.Errorf("write graph: %w", err)
	}
	return nil
}
