package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/livestate"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/tui"
)

// defaultParallelism is the SPEC's default for -parallelism.
const defaultParallelism = 10

// ApplyCommand runs the plan durably.
type ApplyCommand struct {
	cli         *CLI
	flags       commonFlags
	autoApprove bool
	json        bool
	parallelism int
	replace     stringList
	engine      engineFlags
	metrics     metricsFlags
	// bus and ctl exist from when the state is locked: its socket answers
	// wf watch and the reading commands from then on (serve).
	bus *event.Bus
	ctl *controller
	// stdout and stderr wrap the CLI's streams: once a write fails (a
	// closed pipe or terminal) they swallow what follows, so that no view
	// and no message can stop the run.
	stdout, stderr *outputWriter
}

// outputWriter passes writes through until one fails, and from then on
// drops them, reporting success: the output has ended, the run has not.
type outputWriter struct {
	mu    sync.Mutex
	w     io.Writer
	ended error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended != nil {
		return len(p), nil
	}
	if _, err := o.w.Write(p); err != nil {
		o.ended = err
	}
	return len(p), nil
}

// Run implements `wf apply [-auto-approve] [-json] [-parallelism N]
// [-replace ADDR]... [DIR or PLANFILE]`.
func (cmd *ApplyCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	// A closed stdout or stderr never stops an apply (SPEC §4.1).
	catchBrokenPipe()
	cmd.stdout = &outputWriter{w: c.Stdout}
	cmd.stderr = &outputWriter{w: c.Stderr}
	fs := c.newFlagSet("apply", "wf apply [options] [DIR | PLANFILE]",
		"Run the workflows of the configuration in DIR (default \".\"): show the plan,\nask for approval, then run every activity that needs to, retrying under its\npolicy. Activities that already succeeded with the same definition are\nskipped, pending retries resume. With a PLANFILE saved by wf plan -out, run\nexactly that plan, without asking; a plan that no longer matches the\nconfiguration or the state is refused.\n\nExit codes: 0 success, 1 error or failed workflow, 130 interrupted (the\nstate is saved; run wf apply again to resume).")
	cmd.flags.register(fs)
	fs.BoolVar(&cmd.autoApprove, "auto-approve", false, "skip the approval prompt")
	fs.BoolVar(&cmd.json, "json", false, "print one JSON object per event instead of lines or the dashboard (needs -auto-approve)")
	fs.IntVar(&cmd.parallelism, "parallelism", defaultParallelism, "at most `N` exec and http attempts at once")
	fs.Var(&cmd.replace, "replace", "re-run `activity.NAME` (an element: activity.NAME[\"KEY\"]; or after WORKFLOW.) even if it succeeded (repeatable)")
	cmd.metrics.register(fs)
	cmd.engine.register(fs, true)
	target, err := parseDir(fs, args)
	if err != nil {
		return err
	}
	if cmd.parallelism < 1 {
		return usageErr(fs, "-parallelism must be at least 1")
	}
	if cmd.json && !cmd.autoApprove {
		return errors.New("wf apply -json needs -auto-approve: there is no prompt in JSON mode")
	}
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		return cmd.applyTemporal(ctx, target)
	}
	if err := cmd.metrics.open(c.Stderr); err != nil {
		return err
	}
	defer cmd.metrics.close(c.Stderr)
	fi, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if fi.Mode().IsRegular() {
		return cmd.applySaved(ctx, target)
	}
	return cmd.applyDir(ctx, target)
}

// applyDir plans against the current state and, once approved, runs it.
func (cmd *ApplyCommand) applyDir(ctx context.Context, dir string) error {
	c := cmd.cli
	cfg, err := c.loadConfig(dir, cmd.flags.loadOptions(c.Environ), cmd.flags.noColor)
	if err != nil {
		return err
	}
	store, plan, closeState, err := cmd.lockAndPlan(ctx, cfg, cmd.flags.workflow, cmd.replace)
	if err != nil {
		return err
	}
	defer closeState()
	if err := cmd.showPlan(plan); err != nil {
		return err
	}
	if !plan.HasChanges() {
		return nil
	}
	if !cmd.autoApprove {
		if err := cmd.approve(); err != nil {
			return err
		}
	}
	return cmd.execute(ctx, cfg, store, plan)
}

// readSaved reads the plan saved at path, for either engine: the flags
// that shape a plan were fixed when it was saved, so none may be given.
func (cmd *ApplyCommand) readSaved(path string) (*planner.Plan, planner.LoadInputs, error) {
	if len(cmd.flags.vars) > 0 || len(cmd.flags.varFiles) > 0 || len(cmd.replace) > 0 || cmd.flags.workflow != "" {
		return nil, planner.LoadInputs{}, errors.New("-var, -var-file, -replace and -workflow cannot be used with a saved plan: they were fixed when it was saved")
	}
	saved, inputs, err := planner.ReadFile(path)
	if err != nil {
		return nil, planner.LoadInputs{}, fmt.Errorf("read saved plan: %w", err)
	}
	return saved, inputs, nil
}

// applySaved runs a plan saved by wf plan -out, after checking that the
// configuration and the state still produce the same plan.
func (cmd *ApplyCommand) applySaved(ctx context.Context, path string) error {
	c := cmd.cli
	saved, inputs, err := cmd.readSaved(path)
	if err != nil {
		return err
	}
	if inputs.Engine != "" {
		return fmt.Errorf("%s is a plan for the %s engine: run wf apply -engine %s %s", path, inputs.Engine, inputs.Engine, path)
	}
	cfg, err := c.loadConfig(inputs.Dir, config.LoadOptions{
		Vars:     inputs.Vars,
		VarFiles: inputs.VarFiles,
		Env:      envList(inputs.Env),
	}, cmd.flags.noColor)
	if err != nil {
		return err
	}
	store, fresh, closeState, err := cmd.lockAndPlan(ctx, cfg, inputs.Workflow, inputs.Replace)
	if err != nil {
		return err
	}
	defer closeState()
	if err := planner.CheckStale(saved, fresh); err != nil {
		// err starts with "saved plan is stale".
		return fmt.Errorf("%w; run wf plan again", err)
	}
	if !fresh.HasChanges() {
		return cmd.showPlan(fresh)
	}
	return cmd.execute(ctx, cfg, store, fresh)
}

// lockAndPlan opens the state of cfg, creating it if need be, serves its
// socket, and plans against it. The lock is taken before planning, so
// nothing can change the state between the plan that is approved or
// checked and the run. The caller calls closeState when done.
func (cmd *ApplyCommand) lockAndPlan(ctx context.Context, cfg *config.Config, workflow string, replace []string) (_ *statefile.Store, _ *planner.Plan, closeState func(), _ error) {
	c := cmd.cli
	stateDir, err := c.resolveStateDir(&cmd.flags, cfg.Dir)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := statefile.Open(stateDir, statefile.Options{Command: "wf apply", LockTimeout: cmd.flags.lockTimeout})
	if err != nil {
		return nil, nil, nil, err // names the state directory, or the holder of its lock
	}
	stopServe := cmd.serve(ctx, store)
	closeState = func() {
		// The socket goes first: nothing reads the store once it is closed.
		stopServe()
		store.Close()
	}
	plan, err := c.buildPlan(cfg, store, planner.Options{
		Workflow: workflow,
		Replace:  replace,
		Now:      c.now(),
	}, cmd.flags.noColor)
	if err != nil {
		closeState()
		return nil, nil, nil, err
	}
	return store, plan, closeState, nil
}

// serve opens the event socket in the state directory as soon as the
// state is locked: from then on wf watch follows the run, and the reading
// commands (wf plan, history, state list|show, stats), which cannot open
// a locked state, read it through this apply (SPEC §8), during the
// approval prompt too. It returns the function that closes the socket.
func (cmd *ApplyCommand) serve(ctx context.Context, store *statefile.Store) func() {
	cmd.bus = event.NewBus()
	// The dashboard shows its own interrupt notice.
	cmd.ctl = &controller{stderr: cmd.stderr, quiet: cmd.useTUI()}
	sock, err := event.Serve(ctx, filepath.Join(store.Dir(), socketName), cmd.bus, event.ServeOptions{
		OnFireNow: cmd.ctl.FireNow,
		OnRead:    livestate.Serve(store),
	})
	if err != nil {
		// Only wf watch and reads during the run need the socket; the run
		// goes on without it.
		fmt.Fprintf(cmd.stderr, "Warning: wf watch and the reading commands will not work during this run: %v\n", err)
		return func() {}
	}
	return func() { _ = sock.Close() }
}

// useTUI says whether the run shows the dashboard.
func (cmd *ApplyCommand) useTUI() bool {
	return !cmd.json && cmd.cli.IsTerminal(cmd.cli.Stdout)
}

// showPlan prints the plan, except with -json, where the plan event
// carries it.
func (cmd *ApplyCommand) showPlan(plan *planner.Plan) error {
	if cmd.json {
		return nil
	}
	if err := planner.Render(cmd.stdout, plan, cmd.cli.color(cmd.cli.Stdout, cmd.flags.noColor)); err != nil {
		return fmt.Errorf("render plan: %w", err)
	}
	return nil
}

// approve asks for "yes" on the terminal.
func (cmd *ApplyCommand) approve() error {
	c := cmd.cli
	if !cmd.flags.input {
		return errors.New("wf apply -input=false needs -auto-approve (or a plan saved by wf plan -out): it may not ask for approval")
	}
	if !c.IsTerminal(c.Stdin) {
		return errors.New("wf apply needs -auto-approve when stdin is not a terminal")
	}
	fmt.Fprint(cmd.stdout, "\nDo you want to run these activities?\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	line, err := readLine(c.Stdin)
	if err != nil {
		return fmt.Errorf("read approval: %w", err)
	}
	fmt.Fprintln(cmd.stdout)
	if strings.TrimSpace(line) != "yes" {
		return errors.New("apply cancelled")
	}
	return nil
}

// readLine reads up to a newline one byte at a time: a buffered reader
// would swallow keys typed ahead that the dashboard should get.
func readLine(r io.Reader) (string, error) {
	var sb strings.Builder
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return sb.String(), nil
			}
			sb.WriteByte(b[0])
		}
		if errors.Is(err, io.EOF) {
			return sb.String(), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// execute runs the plan with the chosen view and maps the outcome to an
// exit code.
func (cmd *ApplyCommand) execute(ctx context.Context, cfg *config.Config, store *statefile.Store, plan *planner.Plan) error {
	c := cmd.cli
	instances := planInstances(cfg, plan)
	bus, ctl := cmd.bus, cmd.ctl
	cmd.metrics.follow(bus)
	// The view and the event socket (serve) subscribe before the run
	// starts, so that both see its first events (the plan events above
	// all).
	sub := bus.Subscribe()
	useTUI := cmd.useTUI()
	// Signals are caught from here on: an interrupt must stop the run
	// gracefully, never kill the process mid-commit.
	signals := make(chan os.Signal, 2)
	if c.Notify != nil {
		stopNotify := c.Notify(signals)
		defer stopNotify()
	}

	runner := activity.NewRunner(activity.Options{Now: c.Now, BaseEnv: nonNil(c.Environ), Parallelism: cmd.parallelism})
	// Close removes the runner's directory of output and error files.
	defer runner.Close()
	run, err := executor.Start(ctx, executor.Options{
		Config:      cfg,
		Instances:   instances,
		Store:       store,
		Runner:      runner,
		Bus:         bus,
		Parallelism: cmd.parallelism,
	})
	if err != nil {
		bus.Close()
		return fmt.Errorf("start run: %w", err)
	}
	ctl.setRun(run)

	viewCtx, stopView := context.WithCancel(ctx)
	defer stopView()
	if !cmd.json {
		fmt.Fprintln(cmd.stdout) // set the run apart from the plan above it
	}
	viewDone := make(chan error, 1)
	go func() {
		switch {
		case cmd.json:
			viewDone <- jsonView(viewCtx, sub, cmd.stdout)
		case useTUI:
			_, err := tui.Run(viewCtx, sub, tui.Options{
				Title:      "wf apply",
				Color:      c.color(c.Stdout, cmd.flags.noColor),
				Now:        c.Now,
				Controller: ctl,
			}, c.Stdin, c.Stdout)
			viewDone <- err
		default:
			viewDone <- newPlainView(cmd.stdout, len(instances), c.now).run(viewCtx, sub)
		}
	}()

	waitDone := make(chan struct{})
	var outcome executor.Outcome
	var runErr error
	go func() {
		defer close(waitDone)
		outcome, runErr = run.Wait()
	}()
	for waiting := true; waiting; {
		select {
		case <-signals:
			ctl.Interrupt()
		case <-waitDone:
			waiting = false
		}
	}
	// The executor has published everything; closing the bus lets the view
	// drain what is queued and return.
	bus.Close()
	if viewErr := <-viewDone; viewErr != nil {
		// The dashboard could not draw (a closed terminal): the run went
		// on regardless, and its outcome decides the exit code.
		fmt.Fprintf(cmd.stderr, "Warning: the dashboard stopped: %v\n", viewErr)
	}
	if runErr != nil {
		// A commit failed: the run stopped as on a first Ctrl-C.
		return fmt.Errorf("run: %w", runErr)
	}
	status := outcome.Status
	if !cmd.json {
		fmt.Fprintf(cmd.stdout, "\n%s\n", fmtSummary(status, outcome.Summary))
		if err := printOutputs(cmd.stdout, cfg, plan, store.Activities); err != nil {
			fmt.Fprintf(cmd.stderr, "Warning: %v\n", err)
		}
	}
	switch status {
	case event.StatusSucceeded:
		return nil
	case event.StatusInterrupted:
		return exitCode(exitInterrupted)
	default:
		return exitCode(exitError)
	}
}

// socketName is the event socket in the state directory, for wf watch.
const socketName = "events.sock"

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// controller turns operator input (signals, TUI keys, wf watch requests)
// into run commands. The first interrupt stops starting attempts and lets
// running ones finish; the second cancels them.
type controller struct {
	stderr io.Writer
	quiet  bool // set at construction, read-only afterwards

	mu         sync.Mutex
	run        *executor.Run // nil until the run has started
	interrupts int
}

func (c *controller) setRun(run *executor.Run) {
	c.mu.Lock()
	c.run = run
	c.mu.Unlock()
}

func (c *controller) current() *executor.Run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run
}

// FireNow fires a pending retry now. A request that arrives before the
// run has started finds nothing pending and is dropped.
func (c *controller) FireNow(instance, activity string) {
	if run := c.current(); run != nil {
		run.FireNow(instance, activity)
	}
}

// Detach stops the run gracefully; the state stays resumable.
func (c *controller) Detach() {
	c.mu.Lock()
	c.interrupts++
	run := c.run
	c.mu.Unlock()
	run.Stop()
}

// Interrupt handles Ctrl-C, SIGTERM and SIGHUP: the first stops starting
// attempts and lets running ones finish for the grace period; any further
// one cancels them (they are recorded interrupted and resume, with the same
// key, on the next apply). Either way the apply exits 130.
func (c *controller) Interrupt() {
	c.mu.Lock()
	c.interrupts++
	n := c.interrupts
	run := c.run
	c.mu.Unlock()
	if n == 1 {
		if !c.quiet {
			fmt.Fprintln(c.stderr, "Interrupt received: finishing running attempts (press Ctrl-C again to cancel them)...")
		}
		run.Stop()
		return
	}
	if !c.quiet {
		fmt.Fprintln(c.stderr, "Second interrupt: cancelling running attempts...")
	}
	run.Cancel()
}

// planInstances turns a plan into the executor's instances: unchanged
// activities are skipped, resumed ones carry on from their state, every
// other action starts a new execution from attempt 1.
func planInstances(cfg *config.Config, plan *planner.Plan) []core.Instance {
	byName := make(map[string]*config.Workflow, len(cfg.Workflows))
	for _, wf := range cfg.Workflows {
		byName[wf.Name] = wf
	}
	var out []core.Instance
	for _, ip := range plan.Instances {
		wf := byName[ip.Workflow]
		if wf == nil {
			continue // cannot happen: the plan was built from cfg
		}
		modes := make(map[string]core.Mode, len(ip.Activities))
		for _, a := range ip.Activities {
			modes[a.Name] = actionMode(a.Action)
		}
		out = append(out, core.Instance{Workflow: wf, Modes: modes})
	}
	return out
}

func actionMode(a planner.Action) core.Mode {
	switch a {
	case planner.ActionUnchanged:
		return core.ModeSkip
	case planner.ActionResume:
		return core.ModeResume
	default: // run, rerun, retry_failed
		return core.ModeFresh
	}
}
