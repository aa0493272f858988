package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/tui"
)

// WatchCommand attaches the dashboard to a running wf apply through the
// event socket in the state directory.
type WatchCommand struct {
	cli    *CLI
	flags  commonFlags
	engine engineFlags
}

// Run implements `wf watch [DIR]`.
func (cmd *WatchCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("watch", "wf watch [options] [DIR]",
		"Show the dashboard of the wf apply running on the state of DIR (default\n\".\"). q and Ctrl-C close the view and leave the apply running; r fires\nthe selected pending retry; ? lists every key.")
	cmd.flags.registerState(fs)
	cmd.engine.register(fs, false)
	dir, err := parseDir(fs, args)
	if err != nil {
		return err
	}
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		return cmd.watchTemporal(ctx, dir)
	}
	abs, err := absDir(dir)
	if err != nil {
		return err
	}
	stateDir, err := c.resolveStateDir(&cmd.flags, abs)
	if err != nil {
		return err
	}
	sub, err := event.Dial(ctx, filepath.Join(stateDir, socketName))
	if errors.Is(err, event.ErrNoApply) {
		return fmt.Errorf("no wf apply is running on this state (%s)", dir)
	}
	if err != nil {
		return err // names the socket
	}
	defer sub.Unsubscribe()
	if !c.IsTerminal(c.Stdout) {
		// Without a terminal, follow the run as wf apply would print it.
		return newPlainView(c.Stdout, 2, c.now).run(ctx, sub)
	}
	final, err := tui.Run(ctx, sub, tui.Options{
		Title:      "wf watch",
		Color:      c.color(c.Stdout, cmd.flags.noColor),
		Now:        c.Now,
		Controller: &remoteController{sub: sub, stderr: c.Stderr},
		ReadOnly:   true,
	}, c.Stdin, c.Stdout)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if final.Completed && final.Summary != nil {
		fmt.Fprintf(c.Stdout, "%s\n", fmtSummary(final.Status, *final.Summary))
	}
	return nil
}

// remoteController sends fire-now requests over the socket; a watcher can
// neither stop nor interrupt the apply it watches (the dashboard is
// read-only, so Detach and Interrupt are never called).
type remoteController struct {
	sub    *event.Subscription
	stderr io.Writer
}

func (r *remoteController) FireNow(instance, activity string) {
	if err := r.sub.FireNow(instance, activity); err != nil {
		// The dashboard owns the screen; the error shows once it exits.
		fmt.Fprintf(r.stderr, "Warning: fire %s now: %v\n", activity, err)
	}
}

func (r *remoteController) Detach()    {}
func (r *remoteController) Interrupt() {}
