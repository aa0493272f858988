package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	wftemporal "github.com/wf-engine/wf/executor/temporal"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/retry"
)

// planTemporal is wf plan -engine temporal: the plan against the records
// of each instance's last run on Temporal.
func (cmd *PlanCommand) planTemporal(ctx context.Context, dir string) error {
	c := cmd.cli
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
	if cmd.out != "" {
		// A running instance's records change as it runs: a plan saved
		// against them would be stale at once.
		for _, wf := range cfg.Workflows {
			if run := ts.runs[wf.Address()]; run != nil && run.Running() {
				return fmt.Errorf("instance %s is running on Temporal (workflow ID %s): a plan saved now would be stale before it is applied; wait for it to end, or run wf apply -engine temporal %s to attach to it", wf.Address(), run.WorkflowID, dir)
			}
		}
	}
	plan, err := c.buildPlan(cfg, ts, planner.Options{Replace: cmd.replace, Now: c.now()}, cmd.flags.noColor)
	if err != nil {
		return err
	}
	if err := cmd.show(plan); err != nil {
		return err
	}
	if cmd.out != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", dir, err)
		}
		varFiles, err := absPaths(cmd.flags.varFiles)
		if err != nil {
			return err
		}
		inputs := planner.LoadInputs{
			Dir:       abs,
			Vars:      cmd.flags.vars,
			VarFiles:  varFiles,
			Env:       wfVarEnv(c.Environ),
			Workflow:  cmd.flags.workflow,
			Replace:   cmd.replace,
			Engine:    engineTemporal,
			Namespace: cl.Namespace(),
		}
		if err := planner.WriteFile(cmd.out, plan, inputs); err != nil {
			return fmt.Errorf("save plan: %w", err)
		}
		cmd.sayOut("wf apply -engine temporal")
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
	return writeClusterBreakers(ctx, c, cl, st)
}

// writeClusterBreakers shows the circuit breakers the instance's
// activities are behind, as their breaker workflows hold them now: on
// Temporal a breaker is the cluster's, not the instance's.
func writeClusterBreakers(ctx context.Context, c *CLI, cl *wftemporal.Client, st *wftemporal.State) error {
	if len(st.Breakers) == 0 {
		return nil
	}
	fmt.Fprintf(c.Stdout, "\ncircuit breakers (shared by the cluster)\n")
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	for _, name := range slices.Sorted(maps.Keys(st.Breakers)) {
		v, err := cl.Breaker(ctx, name)
		if err != nil {
			return err
		}
		if v == nil {
			fmt.Fprintf(tw, "  %s\tclosed\tno call in its window (workflow %s not running)\n", name, wftemporal.BreakerWorkflowID(name))
			continue
		}
		state := string(v.Circuit.State)
		switch v.Circuit.State {
		case retry.CircuitOpen:
			state = fmt.Sprintf("open since %s, half-open in %s", v.Circuit.Since.UTC().Format(time.RFC3339), v.Circuit.HalfOpenAt.Sub(v.Now).Round(time.Millisecond))
		case retry.CircuitHalfOpen:
			state = fmt.Sprintf("half-open, %d trial %s in flight", len(v.Trials), plural(len(v.Trials), "call", "calls"))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d of %d %s failed in the last %s; opened %d %s; workflow %s\n", name, state,
			v.WindowFailures, v.WindowCalls, plural(v.WindowCalls, "call", "calls"), v.Config.Window, v.Opened, plural(v.Opened, "time", "times"), wftemporal.BreakerWorkflowID(name))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
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
