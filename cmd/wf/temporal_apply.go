package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	wftemporal "github.com/wf-engine/wf/executor/temporal"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/tui"
)

// applyTemporal is wf apply -engine temporal: plan against the records
// Temporal keeps, start the instances that have changes, attach to the
// ones already running, and stream their events to the same views as a
// local apply. Ctrl-C detaches: the instances go on in Temporal.
func (cmd *ApplyCommand) applyTemporal(ctx context.Context, dir string) error {
	c := cmd.cli
	if fi, err := os.Stat(dir); err == nil && fi.Mode().IsRegular() {
		return cmd.applyTemporalSaved(ctx, dir)
	}
	cfg, src, err := c.temporalConfig(dir, &cmd.flags)
	if err != nil {
		return err
	}
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	ts, err := readTemporalStates(ctx, cl, cfg, false)
	if err != nil {
		return err
	}
	// Running instances are attached to; the others are planned.
	planCfg := *cfg
	planCfg.Workflows = nil
	var follow []instanceRef
	for _, wf := range cfg.Workflows {
		if run := ts.runs[wf.Address()]; run != nil && run.Running() {
			fmt.Fprintf(c.Stderr, "Instance %s is already running on Temporal (workflow ID %s): attaching to it.\n", wf.Address(), run.WorkflowID)
			follow = append(follow, instanceRef{wf.Name, wf.Key})
			continue
		}
		planCfg.Workflows = append(planCfg.Workflows, wf)
	}
	var plan *planner.Plan
	if len(planCfg.Workflows) > 0 {
		plan, err = c.buildPlan(&planCfg, ts, planner.Options{Replace: cmd.replace, Now: c.now()}, cmd.flags.noColor)
		if err != nil {
			return err
		}
		if err := cmd.showPlan(plan); err != nil {
			return err
		}
	}
	start := changed(plan)
	if len(start) == 0 && len(follow) == 0 {
		return nil
	}
	if len(start) > 0 && !cmd.autoApprove {
		if err := cmd.approve(); err != nil {
			return err
		}
	}
	return cmd.startTemporal(ctx, cl, ts, src, start, follow, dir)
}

// applyTemporalSaved runs a plan saved by wf plan -engine temporal -out,
// after the checks a local saved plan gets: the configuration and every
// instance's records on Temporal must still produce the same plan. An
// instance that runs now (started since) makes the plan stale too.
func (cmd *ApplyCommand) applyTemporalSaved(ctx context.Context, path string) error {
	c := cmd.cli
	saved, inputs, err := cmd.readSaved(path)
	if err != nil {
		return err
	}
	if inputs.Engine != engineTemporal {
		return fmt.Errorf("%s is a plan for the local engine: run wf apply %s without -engine temporal", path, path)
	}
	flags := cmd.flags
	flags.vars, flags.varFiles, flags.workflow = inputs.Vars, inputs.VarFiles, inputs.Workflow
	cfg, src, err := c.temporalConfigEnv(inputs.Dir, &flags, envList(inputs.Env))
	if err != nil {
		return err
	}
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	if inputs.Namespace != "" && inputs.Namespace != cl.Namespace() {
		return fmt.Errorf("%s was planned against Temporal namespace %q, not %q: pass -namespace %s, or run wf plan again", path, inputs.Namespace, cl.Namespace(), inputs.Namespace)
	}
	ts, err := readTemporalStates(ctx, cl, cfg, false)
	if err != nil {
		return err
	}
	for _, wf := range cfg.Workflows {
		if run := ts.runs[wf.Address()]; run != nil && run.Running() {
			return fmt.Errorf("%w: instance %s is running on Temporal now (workflow ID %s); run wf plan again once it ends", planner.ErrStale, wf.Address(), run.WorkflowID)
		}
	}
	fresh, err := c.buildPlan(cfg, ts, planner.Options{Replace: inputs.Replace, Now: c.now()}, cmd.flags.noColor)
	if err != nil {
		return err
	}
	if err := planner.CheckStale(saved, fresh); err != nil {
		// err starts with "saved plan is stale".
		return fmt.Errorf("%w; run wf plan again", err)
	}
	if err := cmd.showPlan(fresh); err != nil {
		return err
	}
	start := changed(fresh)
	if len(start) == 0 {
		return nil
	}
	return cmd.startTemporal(ctx, cl, ts, src, start, nil, inputs.Dir)
}

// changed are the instances of plan that have changes.
func changed(plan *planner.Plan) []planner.InstancePlan {
	var out []planner.InstancePlan
	if plan != nil {
		for _, ip := range plan.Instances {
			if ip.HasChanges() {
				out = append(out, ip)
			}
		}
	}
	return out
}

// startTemporal starts the planned instances, each from its records on
// Temporal, and follows them with the instances in follow.
func (cmd *ApplyCommand) startTemporal(ctx context.Context, cl *wftemporal.Client, ts *temporalStates, src wftemporal.Sources, start []planner.InstancePlan, follow []instanceRef, dir string) error {
	c := cmd.cli
	for _, ip := range start {
		in := wftemporal.Input{
			Workflow:    ip.Workflow,
			Key:         ip.Key,
			Modes:       map[string]core.Mode{},
			Parallelism: cmd.parallelism,
			TaskQueue:   cmd.engine.queue(),
			// Budgets and breakers hold across every instance on the
			// namespace.
			SharedBudgets:  true,
			SharedBreakers: true,
		}
		in.SetSources(src)
		for _, a := range ip.Activities {
			in.Modes[a.Name] = actionMode(a.Action)
		}
		if st := ts.states[ip.Address()]; st != nil && st.StateID != "" {
			in.StateID = st.StateID
			in.Carry = st.Carry()
		} else {
			in.StateID = wftemporal.NewStateID()
		}
		if _, err := cl.Start(ctx, in, cmd.engine.queue()); err != nil && !errors.Is(err, wftemporal.ErrRunning) {
			return err
		}
		follow = append(follow, instanceRef{ip.Workflow, ip.Key})
	}
	if !cmd.json {
		fmt.Fprintln(c.Stdout)
	}
	return c.followTemporal(ctx, cl, follow, followOptions{
		title: "wf apply", json: cmd.json, noColor: cmd.flags.noColor, dir: dir, engine: &cmd.engine,
	})
}

type instanceRef struct{ workflow, key string }

func (r instanceRef) address() string { return r.workflow + "/" + r.key }

type followOptions struct {
	title    string
	json     bool
	noColor  bool
	readOnly bool
	dir      string
	engine   *engineFlags
}

// followTemporal streams the events of instances running on Temporal into
// the views of a local apply until every instance has ended, or until the
// user detaches (Ctrl-C, q), which leaves the instances running.
func (c *CLI) followTemporal(ctx context.Context, cl *wftemporal.Client, insts []instanceRef, opts followOptions) error {
	bus := event.NewBus()
	sub := bus.Subscribe()
	useTUI := !opts.json && c.IsTerminal(c.Stdout)
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	ctl := &temporalController{ctx: fctx, cl: cl, stop: stopFollow, stderr: c.Stderr, quiet: useTUI}
	signals := make(chan os.Signal, 2)
	if c.Notify != nil {
		stopNotify := c.Notify(signals)
		defer stopNotify()
	}

	type outcome struct {
		state *wftemporal.State
		err   error
	}
	outcomes := make([]outcome, len(insts))
	var wg sync.WaitGroup
	for i, in := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := cl.Follow(fctx, in.workflow, in.key, 0, func(evs []event.Event) { bus.Publish(evs...) }, func(err error) {
				if !useTUI {
					fmt.Fprintf(c.Stderr, "Warning: %v (waiting)\n", err)
				}
			})
			outcomes[i] = outcome{st, err}
		}()
	}
	followed := make(chan struct{})
	go func() {
		wg.Wait()
		close(followed)
	}()

	viewCtx, stopView := context.WithCancel(ctx)
	defer stopView()
	viewDone := make(chan error, 1)
	go func() {
		switch {
		case opts.json:
			viewDone <- jsonView(viewCtx, sub, c.Stdout)
		case useTUI:
			_, err := tui.Run(viewCtx, sub, tui.Options{
				Title:      opts.title,
				Color:      c.color(c.Stdout, opts.noColor),
				Now:        c.Now,
				Controller: ctl,
				ReadOnly:   opts.readOnly,
			}, c.Stdin, c.Stdout)
			// q and Ctrl-C in the dashboard call Detach themselves.
			viewDone <- err
		default:
			viewDone <- newPlainView(c.Stdout, len(insts), c.now).run(viewCtx, sub)
		}
	}()
	for waiting := true; waiting; {
		select {
		case <-signals:
			ctl.Interrupt()
		case <-followed:
			waiting = false
		}
	}
	bus.Close()
	viewErr := <-viewDone
	if ctl.detached() {
		var addrs []string
		for _, in := range insts {
			addrs = append(addrs, in.address())
		}
		what := "wf apply"
		if opts.readOnly {
			what = "wf watch"
		}
		fmt.Fprintf(c.Stderr, "\nDetached from %s: %s goes on on Temporal at %s.\nTo follow it again, run: %s -engine temporal %s\n",
			strings.Join(addrs, ", "), plural(len(addrs), "it", "they"), cl.Address(), what, opts.dir)
		return exitCode(exitInterrupted)
	}
	var sum event.Summary
	status := event.StatusSucceeded
	for i, o := range outcomes {
		if o.err != nil {
			return fmt.Errorf("follow %s: %w", insts[i].address(), o.err)
		}
		if o.state.Status != event.StatusSucceeded {
			status = event.StatusFailed
		}
		if s := o.state.Summary; s != nil {
			sum.Activities += s.Activities
			sum.Succeeded += s.Succeeded
			sum.Failed += s.Failed
			sum.Skipped += s.Skipped
			sum.Unchanged += s.Unchanged
			sum.Pending += s.Pending
			sum.Attempts += s.Attempts
			sum.Retries += s.Retries
			sum.DurationMs = max(sum.DurationMs, s.DurationMs)
		}
	}
	if viewErr != nil {
		return fmt.Errorf("view: %w", viewErr)
	}
	if !opts.json {
		fmt.Fprintf(c.Stdout, "\n%s\n", fmtSummary(status, sum))
	}
	if status != event.StatusSucceeded {
		return exitCode(exitError)
	}
	return nil
}

// temporalController turns the dashboard's keys and signals into Temporal
// requests: r fires a retry (a signal), q and Ctrl-C only detach.
type temporalController struct {
	ctx    context.Context
	cl     *wftemporal.Client
	stop   context.CancelFunc
	stderr interface{ Write([]byte) (int, error) }
	quiet  bool

	mu  sync.Mutex
	det bool
}

func (t *temporalController) FireNow(instance, activity string) {
	wf, key, err := splitInstance(instance)
	if err == nil {
		err = t.cl.FireNow(t.ctx, wf, key, activity)
	}
	if err != nil && !t.quiet {
		fmt.Fprintf(t.stderr, "Warning: fire %s now: %v\n", activity, err)
	}
}

func (t *temporalController) Detach() {
	t.mu.Lock()
	t.det = true
	t.mu.Unlock()
	t.stop()
}

func (t *temporalController) Interrupt() { t.Detach() }

func (t *temporalController) detached() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.det
}

// watchTemporal is wf watch -engine temporal: follow the running instances
// of the configuration in target (or the one instance target names).
func (cmd *WatchCommand) watchTemporal(ctx context.Context, target string) error {
	c := cmd.cli
	cl, err := c.dialTemporal(ctx, &cmd.engine)
	if err != nil {
		return err
	}
	defer cl.Close()
	var insts []instanceRef
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		wf, key, err := splitInstance(target)
		if err != nil {
			return fmt.Errorf("%s is neither a configuration directory nor an instance address (WORKFLOW/KEY)", target)
		}
		insts = append(insts, instanceRef{wf, key})
	} else {
		cfg, err := c.loadConfig(target, config.LoadOptions{Env: c.Environ}, cmd.flags.noColor)
		if err != nil {
			return err
		}
		for _, wf := range cfg.Workflows {
			run, err := cl.Describe(ctx, wf.Name, wf.Key)
			if err != nil {
				return err
			}
			if run != nil && run.Running() {
				insts = append(insts, instanceRef{wf.Name, wf.Key})
			}
		}
		if len(insts) == 0 {
			return fmt.Errorf("no instance of %s is running on Temporal at %s", target, cl.Address())
		}
	}
	err = c.followTemporal(ctx, cl, insts, followOptions{title: "wf watch", noColor: cmd.flags.noColor, readOnly: true, dir: target, engine: &cmd.engine})
	var ee *exitErr
	if errors.As(err, &ee) && ee.err == nil && ee.code != exitInterrupted {
		// A watcher reports the run; it did not fail.
		return nil
	}
	if errors.As(err, &ee) && ee.code == exitInterrupted {
		return nil
	}
	return err
}
