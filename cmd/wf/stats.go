package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wf-engine/wf/executor/metrics/stats"
)

// statsFormatVersion is the version of the `wf stats -json` document.
const statsFormatVersion = "1.0"

// StatsCommand prints retry statistics per activity from state.
type StatsCommand struct {
	cli      *CLI
	flags    commonFlags
	json     bool
	workflow string
}

// Run implements `wf stats [-json] [-workflow NAME] [DIR]`.
func (cmd *StatsCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("stats", "wf stats [options] [DIR]",
		"Show retry statistics per activity, across every instance in the state of\nDIR (default \".\"): attempts, retries, retry rate, error types with counts,\nattempt duration p50/p99, and the time spent waiting for retries and for\nretry budgets.")
	cmd.flags.registerState(fs)
	fs.BoolVar(&cmd.json, "json", false, "print one JSON document")
	fs.StringVar(&cmd.workflow, "workflow", "", "only this workflow `NAME` (default: every workflow)")
	dir, err := parseDir(fs, args)
	if err != nil {
		return err
	}
	b := stats.NewBuilder(c.now())
	store, err := c.openStateReader(ctx, &cmd.flags, dir, "wf stats")
	switch {
	case errors.Is(err, errNoState):
		// Nothing applied yet: no statistics, not an error.
	case err != nil:
		return err
	default:
		defer store.Close()
		instances, err := store.Instances()
		if err != nil {
			return err
		}
		for _, in := range instances {
			if cmd.workflow != "" && in.Workflow != cmd.workflow {
				continue
			}
			acts, err := store.Activities(in.Workflow, in.Key)
			if err != nil {
				return err
			}
			atts, err := store.Attempts(in.Workflow, in.Key, "")
			if err != nil {
				return err
			}
			b.Add(stats.Input{Activities: acts, Attempts: atts})
		}
	}
	res := b.Result()
	if cmd.json {
		return writeStatsJSON(c.Stdout, res)
	}
	return writeStatsTable(c.Stdout, res)
}

// statsDoc is the -json document.
type statsDoc struct {
	FormatVersion string          `json:"format_version"`
	Activities    []statsActivity `json:"activities"`
}

type statsActivity struct {
	Workflow   string             `json:"workflow"`
	Activity   string             `json:"activity"`
	Instances  int                `json:"instances"`
	Attempts   int                `json:"attempts"`
	Retries    int                `json:"retries"`
	RetryRate  float64            `json:"retry_rate"`
	Outcomes   statsOutcomes      `json:"outcomes"`
	ErrorTypes []statsErrorCount  `json:"error_types"`
	Duration   *statsDurationJSON `json:"duration_ms"`
	// Waits in milliseconds.
	RetryWaitMs  int64 `json:"retry_wait_ms"`
	BudgetWaitMs int64 `json:"budget_wait_ms"`
}

type statsOutcomes struct {
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"`
	Interrupted int `json:"interrupted"`
	Running     int `json:"running"`
}

type statsErrorCount struct {
	Type  string `json:"type"`
	Count int    `json:"count"`
}

// statsDurationJSON is null when no attempt could be timed.
type statsDurationJSON struct {
	P50   int64 `json:"p50"`
	P99   int64 `json:"p99"`
	Count int   `json:"count"`
}

func writeStatsJSON(w io.Writer, res []stats.Activity) error {
	doc := statsDoc{FormatVersion: statsFormatVersion, Activities: []statsActivity{}}
	for _, a := range res {
		sa := statsActivity{
			Workflow: a.Workflow, Activity: a.Activity, Instances: a.Instances,
			Attempts: a.Attempts, Retries: a.Retries, RetryRate: a.RetryRate,
			Outcomes: statsOutcomes(a.Outcomes), ErrorTypes: []statsErrorCount{},
			RetryWaitMs: a.RetryWait.Milliseconds(), BudgetWaitMs: a.BudgetWait.Milliseconds(),
		}
		for _, e := range a.ErrorTypes {
			sa.ErrorTypes = append(sa.ErrorTypes, statsErrorCount(e))
		}
		if a.Timed > 0 {
			sa.Duration = &statsDurationJSON{P50: a.DurationP50.Milliseconds(), P99: a.DurationP99.Milliseconds(), Count: a.Timed}
		}
		doc.Activities = append(doc.Activities, sa)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write stats: %w", err)
	}
	return nil
}

func writeStatsTable(w io.Writer, res []stats.Activity) error {
	if len(res) == 0 {
		fmt.Fprintln(w, "No attempts recorded yet: wf apply records them.")
		return nil
	}
	// Numbers align right; the activity column is padded to its widest
	// entry so that it reads left-aligned.
	nameW := len("ACTIVITY")
	for _, a := range res {
		nameW = max(nameW, len(statsAddr(a)))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tINSTANCES\tATTEMPTS\tRETRIES\tRETRY RATE\tP50\tP99\tRETRY WAIT\tBUDGET WAIT\t\n", nameW, "ACTIVITY")
	for _, a := range res {
		p50, p99 := "-", "-"
		if a.Timed > 0 {
			p50, p99 = fmtDuration(a.DurationP50), fmtDuration(a.DurationP99)
		}
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%.1f%%\t%s\t%s\t%s\t%s\t\n", nameW, statsAddr(a), a.Instances, a.Attempts, a.Retries,
			100*a.RetryRate, p50, p99, fmtWaited(a.RetryWait), fmtWaited(a.BudgetWait))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write stats: %w", err)
	}
	var errs []string
	for _, a := range res {
		if len(a.ErrorTypes) == 0 {
			continue
		}
		var parts []string
		for _, e := range a.ErrorTypes {
			parts = append(parts, fmt.Sprintf("%s (%d)", oneLine(e.Type, 60), e.Count))
		}
		errs = append(errs, fmt.Sprintf("  %s: %s", statsAddr(a), strings.Join(parts, ", ")))
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nError types (failed and interrupted attempts):\n%s\n", strings.Join(errs, "\n"))
	}
	return nil
}

// statsAddr is WORKFLOW.activity.NAME, as -replace accepts it.
func statsAddr(a stats.Activity) string { return a.Workflow + "." + a.Activity }

// fmtWaited prints a total wait, "0s" for none.
func fmtWaited(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return fmtDuration(d)
}
