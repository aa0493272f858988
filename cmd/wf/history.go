package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

// HistoryCommand prints the attempt log of an instance.
type HistoryCommand struct {
	cli    *CLI
	flags  commonFlags
	json   bool
	engine engineFlags
}

// Run implements `wf history INSTANCE [ACTIVITY] [-json] [DIR]`.
//
// With two positional arguments after INSTANCE the first is the activity and
// the second the directory. With one, it is the activity when it is written
// activity.NAME or is not a directory, and the directory otherwise.
func (cmd *HistoryCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("history", "wf history [options] INSTANCE [ACTIVITY] [DIR]",
		"Show the attempt log of INSTANCE (e.g. order/order-1001), or of one of its\nactivities (NAME or activity.NAME): number, start, end, duration,\noutcome, error, and the wait before the next attempt.")
	cmd.flags.registerState(fs)
	fs.BoolVar(&cmd.json, "json", false, "print one JSON object per attempt")
	cmd.engine.register(fs, false)
	wf, key, rest, err := parseInstance(fs, args, 2)
	if err != nil {
		return err
	}
	activity, dir := "", "."
	switch len(rest) {
	case 1:
		if isActivityArg(rest[0]) {
			activity = rest[0]
		} else {
			dir = rest[0]
		}
	case 2:
		activity, dir = rest[0], rest[1]
	}
	activity = strings.TrimPrefix(activity, "activity.")
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		return cmd.historyTemporal(ctx, wf, key, activity)
	}

	store, err := c.openStateReader(ctx, &cmd.flags, dir, "wf history")
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := findInstance(store, wf, key); err != nil {
		return err
	}
	var names []string
	if activity != "" {
		names = []string{activity}
	} else {
		acts, err := store.Activities(wf, key)
		if err != nil {
			return err
		}
		for _, a := range sortedActivities(acts) {
			names = append(names, a.Name)
		}
	}
	for i, name := range names {
		attempts, err := store.Attempts(wf, key, name)
		if err != nil {
			return err
		}
		if activity != "" && len(attempts) == 0 {
			return fmt.Errorf("activity.%s has no attempts in %s/%s", name, wf, key)
		}
		if cmd.json {
			if err := writeHistoryJSON(c.Stdout, attempts); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(c.Stdout)
		}
		if err := writeHistoryTable(c.Stdout, name, attempts); err != nil {
			return err
		}
	}
	return nil
}

// isActivityArg tells an activity argument from a directory argument.
func isActivityArg(s string) bool {
	if strings.HasPrefix(s, "activity.") {
		return true
	}
	fi, err := os.Stat(s)
	return err != nil || !fi.IsDir()
}

// historyEntry is the -json form of one attempt. Durations are in
// milliseconds, as in the events of wf apply -json.
type historyEntry struct {
	Workflow       string         `json:"workflow"`
	Instance       string         `json:"instance"`
	Activity       string         `json:"activity"`
	Generation     int            `json:"generation"`
	Attempt        int            `json:"attempt"`
	IdempotencyKey string         `json:"idempotency_key"`
	Start          time.Time      `json:"start"`
	End            *time.Time     `json:"end,omitempty"`
	DurationMs     *int64         `json:"duration_ms,omitempty"`
	Outcome        record.Outcome `json:"outcome"`
	Error          *record.Error  `json:"error,omitempty"`
	WaitMs         *int64         `json:"wait_ms,omitempty"`
	WaitSource     string         `json:"wait_source,omitempty"`
	FiredBy        string         `json:"fired_by,omitempty"`
}

func writeHistoryJSON(w io.Writer, attempts []*record.Attempt) error {
	enc := json.NewEncoder(w)
	for _, a := range attempts {
		e := historyEntry{
			Workflow:       a.Workflow,
			Instance:       a.Workflow + "/" + a.Instance,
			Activity:       "activity." + a.Activity,
			Generation:     a.Generation,
			Attempt:        a.Number,
			IdempotencyKey: a.IdempotencyKey,
			Start:          a.Start,
			Outcome:        a.Outcome,
			Error:          a.Error,
			WaitSource:     a.WaitSource,
			FiredBy:        a.FiredBy,
		}
		if !a.End.IsZero() {
			end := a.End
			e.End = &end
			e.DurationMs = ptr(a.End.Sub(a.Start).Milliseconds())
		}
		if a.HasWait {
			e.WaitMs = ptr(a.Wait.Milliseconds())
		}
		if err := enc.Encode(&e); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func writeHistoryTable(w io.Writer, name string, attempts []*record.Attempt) error {
	fmt.Fprintf(w, "activity.%s\n", name)
	if len(attempts) == 0 {
		fmt.Fprintln(w, "  no attempts")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTART\tEND\tDURATION\tOUTCOME\tERROR\tWAIT BEFORE NEXT")
	gen := attempts[0].Generation
	for i, a := range attempts {
		if a.Generation != gen {
			gen = a.Generation
			fmt.Fprintf(tw, "  -- generation %d\t\t\t\t\t\t\n", gen)
		}
		end, dur := "-", "-"
		if !a.End.IsZero() {
			end = fmtTime(a.End)
			dur = fmtDuration(a.End.Sub(a.Start))
		}
		errText := "-"
		if a.Error != nil {
			errText = a.Error.Type
			if a.Error.Message != "" {
				errText += ": " + oneLine(a.Error.Message, 60)
			}
		}
		var next *record.Attempt
		if i+1 < len(attempts) && attempts[i+1].Generation == a.Generation {
			next = attempts[i+1]
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Number, fmtTime(a.Start), end, dur, a.Outcome, errText, fmtWait(a, next))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// fmtWait describes the wait after attempt a. When the next attempt was
// fired by hand, the wait that actually passed is shown, marked (manual).
func fmtWait(a, next *record.Attempt) string {
	if next != nil && next.FiredBy == "manual" && !a.End.IsZero() {
		return fmtDuration(next.Start.Sub(a.End)) + " (manual)"
	}
	if !a.HasWait {
		return "-"
	}
	s := fmtDuration(a.Wait)
	switch a.WaitSource {
	case "server":
		s += " (server asked)"
	case "budget":
		s += " (budget)"
	}
	return s
}
