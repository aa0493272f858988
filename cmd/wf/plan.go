package main

import (
	"context"
	"fmt"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/planner"
)

// PlanCommand shows what wf apply would run, against the current state.
type PlanCommand struct {
	cli              *CLI
	flags            commonFlags
	out              string
	detailedExitCode bool
	replace          stringList
	json             bool
	engine           engineFlags
}

// Run implements `wf plan [-out FILE] [-detailed-exitcode] [-replace ADDR]... [DIR]`.
func (cmd *PlanCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("plan", "wf plan [options] [DIR]",
		"Compare the configuration in DIR (default \".\") with the state and show\nwhich activities wf apply would run, re-run, resume or leave alone, and\nhow each would be retried.\n\nExit codes: 0 success, 1 error, 2 with -detailed-exitcode when the plan\nhas changes.")
	cmd.flags.register(fs)
	fs.StringVar(&cmd.out, "out", "", "save the plan to `FILE`; wf apply FILE runs exactly that plan")
	fs.BoolVar(&cmd.detailedExitCode, "detailed-exitcode", false, "exit 2 when the plan has changes (0 when none, 1 on error)")
	fs.BoolVar(&cmd.json, "json", false, "print the plan as one JSON document (documented in docs/commands.md)")
	fs.Var(&cmd.replace, "replace", "re-run `activity.NAME` (an element: activity.NAME[\"KEY\"]; or after WORKFLOW.) even if it succeeded (repeatable)")
	cmd.engine.register(fs, false)
	dir, _, err := parseConfigDir(fs, args)
	if err != nil {
		return err
	}
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		return cmd.planTemporal(ctx, dir)
	}
	varFiles, err := absPaths(cmd.flags.varFiles)
	if err != nil {
		return err
	}
	env := wfVarEnv(c.Environ)
	// The directory as typed keeps diagnostics' filenames short.
	cfg, err := c.loadConfig(dir, cmd.flags.loadOptions(c.Environ), cmd.flags.noColor)
	if err != nil {
		return err
	}
	stateDir, err := c.resolveStateDir(&cmd.flags, cfg.Dir)
	if err != nil {
		return err
	}
	plan, err := c.planReadOnly(ctx, cfg, stateDir, planner.Options{
		Workflow: cmd.flags.workflow,
		Replace:  cmd.replace,
		Now:      c.now(),
	}, &cmd.flags)
	if err != nil {
		return err
	}
	if err := cmd.show(plan); err != nil {
		return err
	}
	if cmd.out != "" {
		inputs := planner.LoadInputs{
			Dir:      cfg.Dir,
			Vars:     cmd.flags.vars,
			VarFiles: varFiles,
			Env:      env,
			Workflow: cmd.flags.workflow,
			Replace:  cmd.replace,
		}
		if err := planner.WriteFile(cmd.out, plan, inputs); err != nil {
			return fmt.Errorf("save plan: %w", err)
		}
		cmd.sayOut("wf apply")
	}
	if cmd.detailedExitCode && plan.HasChanges() {
		return exitCode(exitChanges)
	}
	return nil
}

// show prints the plan: as one JSON document with -json, else as text.
// Both engines print their plans this way.
func (cmd *PlanCommand) show(plan *planner.Plan) error {
	c := cmd.cli
	if cmd.json {
		return writeJSON(c.Stdout, "plan", newPlanDoc(plan))
	}
	if err := planner.Render(c.Stdout, plan, c.color(c.Stdout, cmd.flags.noColor)); err != nil {
		return fmt.Errorf("render plan: %w", err)
	}
	return nil
}

// sayOut tells where -out saved the plan and how to run it (apply: the
// command that does); with -json on stderr, since the document is the
// whole of stdout.
func (cmd *PlanCommand) sayOut(apply string) {
	c := cmd.cli
	if cmd.json {
		fmt.Fprintf(c.Stderr, "Saved the plan to: %s\n", cmd.out)
		return
	}
	fmt.Fprintf(c.Stdout, "\nSaved the plan to: %s\n\nTo run exactly this plan, run:\n    %s %q\n", cmd.out, apply, cmd.out)
}

// planReadOnly builds a plan against the state in stateDir, opened
// read-only: nothing in it is created or changed, and a configuration that
// was never applied plans against empty state. A state held by a running
// apply is read through that apply (openReader): the plan is what it is
// at that moment.
func (c *CLI) planReadOnly(ctx context.Context, cfg *config.Config, stateDir string, opts planner.Options, flags *commonFlags) (*planner.Plan, error) {
	store, err := c.openReader(ctx, stateDir, "wf plan", flags.lockTimeout)
	if err != nil {
		return nil, err // names the state directory, or the holder of its lock
	}
	defer store.Close()
	return c.buildPlan(cfg, store, opts, flags.noColor)
}

// buildPlan runs the planner and prints its diagnostics.
func (c *CLI) buildPlan(cfg *config.Config, reader planner.StateReader, opts planner.Options, noColor bool) (*planner.Plan, error) {
	plan, diags := planner.Build(cfg, reader, opts)
	if err := c.writeDiags(diags, cfg, noColor); err != nil {
		return nil, err
	}
	if diags.HasErrors() || plan == nil {
		return nil, exitCode(exitError)
	}
	return plan, nil
}
