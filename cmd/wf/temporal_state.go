package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/wf-engine/wf/planner"
)

// planTemporal is wf plan -engine temporal: the plan against the records
// of each instance's last run on Temporal.
func (cmd *PlanCommand) planTemporal(ctx context.Context, dir string) error {
	c := cmd.cli
	if cmd.out != "" {
		return errors.New("wf plan -engine temporal cannot save a plan (-out) yet")
	}
	cfg, _, err := c.temporalConfig(dir, &cmd.flags)
	if err != nil {
		return err
	}
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	ts, err := readTemporalStates(ctx, cl, cfg, true)
	if err != nil {
		return err
	}
	plan, err := c.buildPlan(cfg, ts, planner.Options{Replace: cmd.replace, Now: c.now()}, cmd.flags.noColor)
	if err != nil {
		return err
	}
	if err := planner.Render(c.Stdout, plan, c.color(c.Stdout, cmd.flags.noColor)); err != nil {
		return fmt.Errorf("render plan: %w", err)
	}
	if cmd.detailedExitCode && plan.HasChanges() {
		return exitCode(exitChanges)
	}
	return nil
}

// historyTemporal is wf history -engine temporal: the attempt log the
// instance's interpreter recorded in Temporal.
func (cmd *HistoryCommand) historyTemporal(ctx context.Context, wf, key, activity string) error {
	c := cmd.cli
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	st, _, err := cl.State(ctx, wf, key)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("instance %s/%s is not on Temporal at %s (wf state list -engine temporal shows what is)", wf, key, cl.Address())
	}
	if st.DroppedAttempts > 0 && !cmd.json {
		fmt.Fprintf(c.Stdout, "(%d older attempts are no longer kept)\n\n", st.DroppedAttempts)
	}
	return cmd.view().write(c.Stdout, wf, key, activity, st.Activities, st.Attempts)
}

// listTemporal is wf state list -engine temporal.
func (cmd *StateListCommand) listTemporal(ctx context.Context) error {
	c := cmd.cli
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	list, err := cl.List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	for _, l := range list {
		summary := l.Run.StatusName()
		if st, err := cl.RunState(ctx, &l.Run); err == nil && st != nil {
			summary = statusSummary(st.Activities)
			if l.Run.Running() {
				summary += " (running)"
			}
		}
		fmt.Fprintf(tw, "%s/%s\t%s\n", l.Workflow, l.Key, summary)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// showTemporal is wf state show -engine temporal.
func (cmd *StateShowCommand) showTemporal(ctx context.Context, wf, key string) error {
	c := cmd.cli
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	st, run, err := cl.State(ctx, wf, key)
	if err != nil {
		return err
	}
	if st == nil || st.Instance == nil {
		return fmt.Errorf("instance %s/%s is not on Temporal at %s (wf state list -engine temporal shows what is)", wf, key, cl.Address())
	}
	last := lastAttempts(st.Attempts)
	if cmd.json {
		return writeJSON(c.Stdout, "state show", newStateShowDoc(st.Instance, st.Activities, last))
	}
	writeInstance(c.Stdout, st.Instance, st.Activities, last, cmd.full, c.now())
	fmt.Fprintf(c.Stdout, "\ntemporal\n  workflow ID  %s\n  run ID       %s\n  status       %s\n  runs         %d\n", run.WorkflowID, run.RunID, run.StatusName(), st.Runs)
	return nil
}

// rmTemporal is wf state rm -engine temporal.
func (cmd *StateRmCommand) rmTemporal(ctx context.Context, wf, key string) error {
	c := cmd.cli
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Remove(ctx, wf, key); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "Removed %s/%s.\n", wf, key)
	return nil
}
