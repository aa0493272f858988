package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

// errNoState is returned when a command that reads state finds none.
var errNoState = errors.New("no state")

// StateCommand dispatches `wf state list|show|rm|check`.
type StateCommand struct {
	cli *CLI
}

const stateUsage = `Usage: wf state <subcommand> [options] [args]

Inspect and edit the state of the configuration in DIR (default ".").

Subcommands:
  list [DIR]             List every workflow instance with a status summary
  show INSTANCE [DIR]    Show every activity of an instance
  rm INSTANCE [DIR]      Forget an instance: its next apply starts afresh
  check [DIR]            Verify every file and record of the state
`

// Run implements `wf state`.
func (cmd *StateCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	if len(args) == 0 {
		fmt.Fprint(c.Stderr, stateUsage)
		return exitCode(exitError)
	}
	var sub command
	switch args[0] {
	case "list":
		sub = &StateListCommand{cli: c}
	case "show":
		sub = &StateShowCommand{cli: c}
	case "rm":
		sub = &StateRmCommand{cli: c}
	case "check":
		sub = &StateCheckCommand{cli: c}
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.Stderr, stateUsage)
		return nil
	default:
		fmt.Fprintf(c.Stderr, "Error: wf state has no subcommand %q.%s\n\n%s", args[0], didYouMean(args[0], []string{"list", "show", "rm"}), stateUsage)
		return exitCode(exitError)
	}
	return sub.Run(ctx, args[1:])
}

// existingStateDir is the state directory of the configuration in dir,
// which must exist: errNoState when it does not.
func (c *CLI) existingStateDir(flags *commonFlags, dir string) (string, error) {
	stateDir, err := c.stateDirOf(flags, dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(stateDir); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w in %s: wf apply creates it", errNoState, stateDir)
	} else if err != nil {
		return "", fmt.Errorf("open state: %w", err)
	}
	return stateDir, nil
}

// openState opens the existing state of the configuration in dir. It never
// creates a state directory: reading commands have nothing to read there,
// and a reader (readOnly) changes nothing in it.
func (c *CLI) openState(flags *commonFlags, dir, command string, readOnly bool) (*statefile.Store, error) {
	stateDir, err := c.existingStateDir(flags, dir)
	if err != nil {
		return nil, err
	}
	store, err := statefile.Open(stateDir, statefile.Options{Command: command, ReadOnly: readOnly, LockTimeout: flags.lockTimeout})
	if err != nil {
		return nil, err // names the state directory, or the holder of its lock
	}
	return store, nil
}

// openStateReader opens the existing state of the configuration in dir for
// reading (openReader): from the store, or from the apply that holds it.
// Like openState it creates nothing, and a missing state is errNoState.
func (c *CLI) openStateReader(ctx context.Context, flags *commonFlags, dir, command string) (stateReader, error) {
	stateDir, err := c.existingStateDir(flags, dir)
	if err != nil {
		return nil, err
	}
	return c.openReader(ctx, stateDir, command, flags.lockTimeout)
}

// stateDirOf is the state directory of the configuration in dir.
func (c *CLI) stateDirOf(flags *commonFlags, dir string) (string, error) {
	abs, err := absDir(dir)
	if err != nil {
		return "", err
	}
	return c.resolveStateDir(flags, abs)
}

// StateListCommand lists the instances in state.
type StateListCommand struct {
	cli    *CLI
	flags  commonFlags
	json   bool
	engine engineFlags
}

// Run implements `wf state list [DIR]`.
func (cmd *StateListCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("state list", "wf state list [options] [DIR]",
		"List every workflow instance in the state, one address per line, with a\nsummary of its activities' statuses.")
	cmd.flags.registerState(fs)
	fs.BoolVar(&cmd.json, "json", false, "print one JSON document (documented in docs/commands.md)")
	cmd.engine.register(fs, false)
	dir, err := parseDir(fs, args)
	if err != nil {
		return err
	}
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		return cmd.listTemporal(ctx)
	}
	doc := stateListDoc{FormatVersion: jsonFormatVersion, Instances: []stateListInstance{}}
	store, err := c.openStateReader(ctx, &cmd.flags, dir, "wf state list")
	if errors.Is(err, errNoState) {
		// Nothing applied yet: nothing to list.
		if cmd.json {
			return writeJSON(c.Stdout, "state list", doc)
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer store.Close()
	instances, err := store.Instances()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	for _, inst := range instances {
		acts, err := store.Activities(inst.Workflow, inst.Key)
		if err != nil {
			return err
		}
		if cmd.json {
			doc.Instances = append(doc.Instances, newStateListInstance(inst, acts))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", inst.Address(), statusSummary(acts))
	}
	if cmd.json {
		return writeJSON(c.Stdout, "state list", doc)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// statusSummary counts activities per status: "3 succeeded, 1 waiting".
func statusSummary(acts map[string]*record.Activity) string {
	order := []record.Status{
		record.StatusSucceeded, record.StatusFailed, record.StatusWaiting,
		record.StatusRunning, record.StatusPending, record.StatusSkipped,
	}
	counts := map[record.Status]int{}
	for _, a := range acts {
		counts[a.Status]++
	}
	var parts []string
	for _, s := range order {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
			delete(counts, s)
		}
	}
	// Statuses of a newer wf still show up.
	var rest []string
	for s := range counts {
		rest = append(rest, string(s))
	}
	sort.Strings(rest)
	for _, s := range rest {
		parts = append(parts, fmt.Sprintf("%d %s", counts[record.Status(s)], s))
	}
	if len(parts) == 0 {
		return "no activities"
	}
	return fmt.Sprintf("%d %s: %s", len(acts), plural(len(acts), "activity", "activities"), strings.Join(parts, ", "))
}

// StateShowCommand shows one instance in detail.
type StateShowCommand struct {
	cli    *CLI
	flags  commonFlags
	json   bool
	full   bool
	engine engineFlags
}

// Run implements `wf state show INSTANCE [DIR]`.
func (cmd *StateShowCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("state show", "wf state show [options] INSTANCE [DIR]",
		"Show every activity of INSTANCE (e.g. order/order-1001): status,\ngeneration, attempts, idempotency key, pending timer, outputs and last\nerror. Long outputs and errors are cut to one line; -full shows them\nwhole, with what the last attempt printed.")
	cmd.flags.registerState(fs)
	fs.BoolVar(&cmd.json, "json", false, "print one JSON document (documented in docs/commands.md)")
	fs.BoolVar(&cmd.full, "full", false, "show outputs and errors whole, and what each activity's last attempt printed")
	cmd.engine.register(fs, false)
	wf, key, dir, err := parseInstanceDir(fs, args)
	if err != nil {
		return err
	}
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		return cmd.showTemporal(ctx, wf, key)
	}
	store, err := c.openStateReader(ctx, &cmd.flags, dir, "wf state show")
	if err != nil {
		return err
	}
	defer store.Close()
	inst, err := findInstance(store, wf, key)
	if err != nil {
		return err
	}
	acts, err := store.Activities(wf, key)
	if err != nil {
		return err
	}
	var last map[string]*record.Attempt
	if cmd.json || cmd.full {
		atts, err := store.Attempts(wf, key, "")
		if err != nil {
			return err
		}
		last = lastAttempts(atts)
	}
	if cmd.json {
		return writeJSON(c.Stdout, "state show", newStateShowDoc(inst, acts, last))
	}
	writeInstance(c.Stdout, inst, acts, last, cmd.full, c.now())
	return nil
}

// findInstance returns the instance record or a "not in state" error.
func findInstance(store stateReader, wf, key string) (*record.Instance, error) {
	inst, err := store.Instance(wf, key)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, fmt.Errorf("instance %s/%s is not in the state (wf state list shows what is)", wf, key)
	}
	return inst, nil
}

// sortedActivities orders an instance's activities by name.
func sortedActivities(acts map[string]*record.Activity) []*record.Activity {
	out := make([]*record.Activity, 0, len(acts))
	for _, a := range acts {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// maxShownOutput bounds the outputs shown per activity: state show is an
// overview, and outputs can be megabytes.
const maxShownOutput = 200

func writeInstance(w io.Writer, inst *record.Instance, acts map[string]*record.Activity, last map[string]*record.Attempt, full bool, now time.Time) {
	fmt.Fprintf(w, "%s\n", inst.Address())
	fmt.Fprintf(w, "  created  %s\n", fmtTime(inst.Created))
	fmt.Fprintf(w, "  updated  %s\n", fmtTime(inst.Updated))
	cut := false
	for _, a := range sortedActivities(acts) {
		fmt.Fprintf(w, "\nactivity.%s\n", a.Name)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  status\t%s\n", a.Status)
		if a.FailReason != "" {
			fmt.Fprintf(tw, "  reason\t%s\n", fmtReason(a.FailReason))
		}
		fmt.Fprintf(tw, "  generation\t%d\n", a.Generation)
		fmt.Fprintf(tw, "  attempts\t%d\n", a.Attempts)
		fmt.Fprintf(tw, "  idempotency key\t%s\n", a.IdempotencyKey)
		if !a.FirstStart.IsZero() {
			fmt.Fprintf(tw, "  first start\t%s\n", fmtTime(a.FirstStart))
		}
		if !a.Finished.IsZero() {
			fmt.Fprintf(tw, "  finished\t%s\n", fmtTime(a.Finished))
		}
		if t := a.Timer; t != nil {
			fmt.Fprintf(tw, "  pending timer\t%s\n", fmtTimer(t, now))
		}
		if len(a.Outputs) > 0 && !full {
			shown := oneLine(string(a.Outputs), maxShownOutput)
			cut = cut || shown != string(a.Outputs)
			fmt.Fprintf(tw, "  outputs\t%s\n", shown)
		}
		if e := a.LastError; e != nil && !full {
			msg := e.Type
			if e.Message != "" {
				shown := oneLine(e.Message, maxShownOutput)
				cut = cut || shown != e.Message
				msg += ": " + shown
			}
			if e.NonRetryable {
				msg += " (non_retryable)"
			}
			fmt.Fprintf(tw, "  last error\t%s\n", msg)
		}
		if a.HeartbeatDetails != "" {
			shown := oneLine(a.HeartbeatDetails, maxShownOutput)
			if full {
				shown = a.HeartbeatDetails
			}
			fmt.Fprintf(tw, "  heartbeat details\t%s\n", shown)
		}
		fmt.Fprintf(tw, "  definition hash\t%s\n", a.DefHash)
		_ = tw.Flush()
		if full {
			writeFull(w, a, last[a.Name])
		}
	}
	if cut {
		fmt.Fprintln(w, "\n(long outputs and errors are cut to one line; wf state show -full shows them whole)")
	}
}

// writeFull prints an activity's outputs and last error whole, and what
// its last attempt printed, for wf state show -full.
func writeFull(w io.Writer, a *record.Activity, last *record.Attempt) {
	if len(a.Outputs) > 0 {
		fmt.Fprintln(w, "  outputs:")
		var buf bytes.Buffer
		if json.Indent(&buf, a.Outputs, "", "  ") != nil {
			buf.Reset()
			buf.Write(a.Outputs)
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	writeErrorBlock(w, "  ", "last error", a.LastError)
	if last != nil && last.Output != nil {
		fmt.Fprintf(w, "  attempt %d printed:\n", last.Number)
		writeOutput(w, "    ", last.Output)
	}
}

func fmtTimer(t *record.Timer, now time.Time) string {
	var what string
	switch t.Kind {
	case record.TimerSleep:
		what = fmt.Sprintf("sleep (attempt %d) ends", t.Attempt)
	case record.TimerBudget:
		what = fmt.Sprintf("attempt %d waits for the retry budget until", t.Attempt)
	default:
		what = fmt.Sprintf("attempt %d due", t.Attempt)
	}
	s := fmt.Sprintf("%s %s", what, fmtTime(t.FireAt))
	if d := t.FireAt.Sub(now); d > 0 {
		s += " (in " + fmtDuration(d) + ")"
	} else {
		s += " (due now)"
	}
	if t.Source != "" && t.Source != "policy" {
		s += ", delay from " + t.Source
	}
	return s
}

// fmtTime prints a stored time in the local zone with milliseconds and
// the zone's name, so that two machines' outputs can be compared.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05.000 MST")
}

// StateRmCommand removes an instance from state.
type StateRmCommand struct {
	cli    *CLI
	flags  commonFlags
	engine engineFlags
}

// Run implements `wf state rm INSTANCE [DIR]`.
func (cmd *StateRmCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("state rm", "wf state rm [options] INSTANCE [DIR]",
		"Remove INSTANCE (e.g. order/order-1001) with its activities, attempts and\ntimers from the state; the next wf apply runs it from scratch.")
	cmd.flags.registerState(fs)
	cmd.engine.register(fs, false)
	cmd.flags.registerLock(fs)
	wf, key, dir, err := parseInstanceDir(fs, args)
	if err != nil {
		return err
	}
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		return cmd.rmTemporal(ctx, wf, key)
	}
	store, err := c.openState(&cmd.flags, dir, "wf state rm", false)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := findInstance(store, wf, key); err != nil {
		return err
	}
	if err := store.DeleteInstance(wf, key); err != nil {
		return fmt.Errorf("remove %s/%s: %w", wf, key, err)
	}
	fmt.Fprintf(c.Stdout, "Removed %s/%s.\n", wf, key)
	return nil
}

// StateCheckCommand verifies a state.
type StateCheckCommand struct {
	cli     *CLI
	flags   commonFlags
	verbose bool
}

// Run implements `wf state check [DIR]`.
func (cmd *StateCheckCommand) Run(_ context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("state check", "wf state check [options] [DIR]",
		"Verify the state of the configuration in DIR (default \".\"): every log\nrecord's and table's checksum, the checkpoint, and every record decoded.\nIt changes nothing. Exit 0 when the state is healthy, 1 when it is damaged\n(the error says what is wrong).")
	cmd.flags.registerState(fs)
	cmd.flags.registerLock(fs)
	fs.BoolVar(&cmd.verbose, "v", false, "also show the log, checkpoint and database files that were checked")
	dir, err := parseDir(fs, args)
	if err != nil {
		return err
	}
	stateDir, err := c.stateDirOf(&cmd.flags, dir)
	if err != nil {
		return err
	}
	rep, err := statefile.Check(stateDir, statefile.Options{Command: "wf state check", LockTimeout: cmd.flags.lockTimeout})
	if err != nil {
		return err // names the state directory and what is wrong
	}
	writeCheckReport(c.Stdout, rep, cmd.verbose)
	return nil
}

// writeCheckReport prints what the state holds; with verbose, also how it
// is stored (which changes with checkpoints and crashes, not with what
// was committed).
func writeCheckReport(w io.Writer, r *statefile.CheckReport, verbose bool) {
	if !r.Exists {
		fmt.Fprintf(w, "No state in %s yet: nothing to check (wf apply creates it).\n", r.Dir)
		return
	}
	fmt.Fprintf(w, "State in %s is healthy.\n", r.Dir)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch r.Schema {
	case 2:
		fmt.Fprintf(tw, "  schema\t2 (log, checkpoint, database)%s\n", recordSchema(r))
	case 1:
		fmt.Fprintf(tw, "  schema\t1 (database only, from an older wf; the next wf apply adds the log)%s\n", recordSchema(r))
	default:
		fmt.Fprintf(tw, "  schema\tnone yet (nothing was ever committed)\n")
	}
	if r.Identity != "" {
		fmt.Fprintf(tw, "  identity\t%s\n", r.Identity)
	}
	if verbose && r.Schema == 2 {
		fmt.Fprintf(tw, "  log\t%d %s, sequences up to %d; the database's tables hold up to %d, %d %s after that\n",
			r.LogSegments, plural(r.LogSegments, "segment", "segments"), r.LogLast, r.Checkpoint, r.Replayed, plural(r.Replayed, "record", "records"))
	}
	if verbose {
		fmt.Fprintf(tw, "  database\t%d %s verified, %d value %s\n", r.Tables, plural(r.Tables, "table", "tables"), r.ValueLogs, plural(r.ValueLogs, "log", "logs"))
	}
	fmt.Fprintf(tw, "  records\t%d %s, %d %s (%d with a timer), %d %s, %d %s, %d %s, %d %s: all decoded\n",
		r.Instances, plural(r.Instances, "instance", "instances"),
		r.Activities, plural(r.Activities, "activity", "activities"), r.Timers,
		r.Attempts, plural(r.Attempts, "attempt", "attempts"),
		r.Budgets, plural(r.Budgets, "budget", "budgets"),
		r.Breakers, plural(r.Breakers, "breaker", "breakers"),
		r.Spawns, plural(r.Spawns, "spawn", "spawns"))
	if r.TornAfter > 0 {
		fmt.Fprintf(tw, "  note\tlog records from %d on were cut short by a power loss (%d written after it with no sync completed in between); none was acknowledged as synced, and the next wf apply clears them\n", r.TornRecord, r.TornAfter)
	} else if r.TornRecord > 0 {
		fmt.Fprintf(tw, "  note\tlog record %d was cut short by a crash; it was never acknowledged, and the next wf apply clears it\n", r.TornRecord)
	}
	if verbose && r.Residue > 0 {
		fmt.Fprintf(tw, "  note\t%d %s left by a crash (memtable logs, unlisted tables, covered log segments); the next wf apply removes them\n", r.Residue, plural(r.Residue, "file", "files"))
	}
	_ = tw.Flush()
}

// recordSchema says which encoding of the records the state holds (the
// layout above and the records' encoding have versions of their own).
func recordSchema(r *statefile.CheckReport) string {
	if r.RecordSchema == 0 {
		return ""
	}
	return fmt.Sprintf(", records schema %d", r.RecordSchema)
}
