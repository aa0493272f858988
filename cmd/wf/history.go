package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wf-engine/wf/statefile/record"
)

// HistoryCommand prints the attempt log of an instance.
type HistoryCommand struct {
	cli    *CLI
	flags  commonFlags
	json   bool
	full   bool
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
	fs.BoolVar(&cmd.json, "json", false, "print one JSON object per attempt (documented in docs/commands.md)")
	fs.BoolVar(&cmd.full, "full", false, "also print each attempt's whole error and the tail of what it printed")
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
	acts, err := store.Activities(wf, key)
	if err != nil {
		return err
	}
	// One read of the whole log: the sections agree with each other even
	// while an apply is adding to it.
	filter := activity
	if _, ok := acts[activity]; !ok {
		// An activity with for_each: the log of every element (write
		// picks them), or a name that is not there (write says so).
		filter = ""
	}
	all, err := store.Attempts(wf, key, filter)
	if err != nil {
		return err
	}
	return cmd.view().write(c.Stdout, wf, key, activity, acts, all)
}

// view is how the flags ask for the attempt log.
func (cmd *HistoryCommand) view() historyView {
	return historyView{json: cmd.json, full: cmd.full}
}

// historyView prints an attempt log: a table per activity, or with json
// one object per attempt; with full, every attempt's whole error and the
// output it printed below the table.
type historyView struct {
	json, full bool
}

// write prints the log of instance wf/key (of activity alone when it is
// not ""), from the activity records acts and the attempts all. Sections
// come in execution order: by the start of each activity's first attempt.
func (v historyView) write(w io.Writer, wf, key, activity string, acts map[string]*record.Activity, all []*record.Attempt) error {
	by := map[string][]*record.Attempt{}
	for _, a := range all {
		by[a.Activity] = append(by[a.Activity], a)
	}
	var names []string
	if activity != "" {
		var err error
		if names, err = namesIn(acts, wf, key, activity); err != nil {
			return err
		}
		if len(names) == 1 && len(by[names[0]]) == 0 {
			return fmt.Errorf("activity.%s has no attempts in %s/%s", names[0], wf, key)
		}
	} else {
		names = executionOrder(acts, by)
	}
	bw := bufio.NewWriter(w)
	for i, name := range names {
		attempts := by[name]
		if v.json {
			if err := writeHistoryJSON(bw, attempts); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(bw)
		}
		writeHistoryTable(bw, name, attempts, v.full)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// executionOrder orders activities by the start of their first attempt
// (the order they ran in), then by name; those that never started come
// last, by name.
func executionOrder(acts map[string]*record.Activity, by map[string][]*record.Attempt) []string {
	names := make([]string, 0, len(acts))
	for name := range acts {
		names = append(names, name)
	}
	for name := range by {
		if acts[name] == nil {
			names = append(names, name)
		}
	}
	first := func(name string) (time.Time, bool) {
		var t time.Time
		for _, a := range by[name] {
			if t.IsZero() || a.Start.Before(t) {
				t = a.Start
			}
		}
		return t, !t.IsZero()
	}
	sort.Slice(names, func(i, j int) bool {
		ti, oki := first(names[i])
		tj, okj := first(names[j])
		switch {
		case oki != okj:
			return oki
		case oki && !ti.Equal(tj):
			return ti.Before(tj)
		}
		return names[i] < names[j]
	})
	return names
}

// isActivityArg tells an activity argument from a directory argument.
func isActivityArg(s string) bool {
	if strings.HasPrefix(s, "activity.") {
		return true
	}
	fi, err := os.Stat(s)
	return err != nil || !fi.IsDir()
}

func writeHistoryJSON(w io.Writer, attempts []*record.Attempt) error {
	enc := json.NewEncoder(w)
	for _, a := range attempts {
		e := newHistoryEntry(a)
		if err := enc.Encode(&e); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
	}
	return nil
}

// maxErrorCell is the width of the table's error column; a longer error
// is cut there, and the table says how to see it whole (-full).
const maxErrorCell = 60

func writeHistoryTable(w io.Writer, name string, attempts []*record.Attempt, full bool) {
	fmt.Fprintf(w, "activity.%s\n", name)
	if len(attempts) == 0 {
		fmt.Fprintln(w, "  no attempts")
		return
	}
	t := &table{indent: "  "}
	t.row("#", "START", "END", "DURATION", "OUTCOME", "ERROR", "WAIT BEFORE NEXT")
	gen := attempts[0].Generation
	cut := false
	for i, a := range attempts {
		if a.Generation != gen {
			gen = a.Generation
			t.line(fmt.Sprintf("-- generation %d", gen))
		}
		end, dur := "-", "-"
		if !a.End.IsZero() {
			end = fmtTime(a.End)
			dur = fmtDuration(a.End.Sub(a.Start))
		}
		errText := "-"
		if a.Error != nil {
			whole := errorText(a.Error)
			errText = oneLine(whole, maxErrorCell)
			cut = cut || errText != whole
		}
		var next *record.Attempt
		if i+1 < len(attempts) && attempts[i+1].Generation == a.Generation {
			next = attempts[i+1]
		}
		t.row(fmt.Sprint(a.Number), fmtTime(a.Start), end, dur, string(a.Outcome), errText, fmtWait(a, next))
	}
	t.write(w)
	if full {
		for _, a := range attempts {
			writeAttemptDetail(w, a)
		}
		return
	}
	if cut {
		fmt.Fprintln(w, "  (errors are cut to one line; wf history -full shows them whole, with what each attempt printed)")
	}
}

// errorText is "type: message".
func errorText(e *record.Error) string {
	if e.Message == "" {
		return e.Type
	}
	return e.Type + ": " + e.Message
}

// writeAttemptDetail prints an attempt's whole error and the tail of what
// it printed, for wf history -full.
func writeAttemptDetail(w io.Writer, a *record.Attempt) {
	if a.Error == nil && a.Output == nil {
		return
	}
	fmt.Fprintf(w, "\n  attempt %d", a.Number)
	if a.Generation > 1 {
		fmt.Fprintf(w, " (generation %d)", a.Generation)
	}
	fmt.Fprintln(w)
	writeErrorBlock(w, "    ", "error", a.Error)
	writeOutput(w, "    ", a.Output)
}

// writeErrorBlock prints a recorded error as "LABEL: TYPE", flagged when
// it is non_retryable, with its whole message wrapped below, one level
// deeper. A nil error prints nothing.
func writeErrorBlock(w io.Writer, indent, label string, e *record.Error) {
	if e == nil {
		return
	}
	flag := ""
	if e.NonRetryable {
		flag = " (non_retryable)"
	}
	fmt.Fprintf(w, "%s%s: %s%s\n", indent, label, e.Type, flag)
	if e.Message != "" {
		writeBlock(w, indent+"  ", e.Message)
	}
}

// writeOutput prints the captured streams of an attempt, each under its
// name, with how much was cut from its start.
func writeOutput(w io.Writer, indent string, o *record.Output) {
	if o == nil {
		return
	}
	for _, s := range []struct {
		name string
		text string
		size int
	}{{"stdout", o.Stdout, o.StdoutBytes}, {"stderr", o.Stderr, o.StderrBytes}, {"body", o.Body, o.BodyBytes}} {
		if s.text == "" {
			continue
		}
		head := s.name
		if s.size > len(s.text) {
			head += fmt.Sprintf(" (the last %d of %d bytes)", len(s.text), s.size)
		}
		fmt.Fprintf(w, "%s%s:\n", indent, head)
		writeBlock(w, indent+"  ", s.text)
	}
}

// writeBlock prints text indented, wrapped at 100 columns, whole.
func writeBlock(w io.Writer, indent, text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		for _, part := range wrap(line, 100-len(indent)) {
			fmt.Fprintf(w, "%s%s\n", indent, part)
		}
	}
}

// wrap cuts a line into pieces of at most width runes, at spaces where it
// can; nothing is dropped.
func wrap(line string, width int) []string {
	width = max(width, 20)
	r := []rune(line)
	var out []string
	for len(r) > width {
		cut := width
		for i := width; i > width/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		out = append(out, strings.TrimRight(string(r[:cut]), " "))
		r = r[cut:]
		for len(r) > 0 && r[0] == ' ' {
			r = r[1:]
		}
	}
	return append(out, string(r))
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
		// The delay the failure asked for: a Retry-After for http, the
		// error file's retry_after for exec (the executor marks both
		// "server").
		if a.Error != nil && strings.HasPrefix(a.Error.Type, "http:") {
			s += " (server asked)"
		} else {
			s += " (activity asked)"
		}
	case "budget":
		s += " (budget)"
	}
	return s
}

// table lays out rows of cells in columns two spaces apart. Lines added
// with line (generation headings) are printed as they are and do not
// widen any column.
type table struct {
	indent string
	rows   [][]string // a nil row is a free line
	lines  []string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells); t.lines = append(t.lines, "") }

func (t *table) line(s string) { t.rows = append(t.rows, nil); t.lines = append(t.lines, s) }

func (t *table) write(w io.Writer) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for i, r := range t.rows {
		if r == nil {
			fmt.Fprintf(w, "%s%s\n", t.indent, t.lines[i])
			continue
		}
		var sb strings.Builder
		sb.WriteString(t.indent)
		for j, c := range r {
			sb.WriteString(c)
			if j < len(r)-1 {
				sb.WriteString(strings.Repeat(" ", widths[j]-utf8.RuneCountInString(c)+2))
			}
		}
		fmt.Fprintln(w, sb.String())
	}
}
