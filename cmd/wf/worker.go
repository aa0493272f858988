package main

import (
	"context"
	"fmt"
	"os"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/event"
	wftemporal "github.com/wf-engine/wf/executor/temporal"
)

// WorkerCommand runs a Temporal worker for the configuration in DIR.
type WorkerCommand struct {
	cli         *CLI
	engine      engineFlags
	parallelism int
	metrics     metricsFlags
}

// Run implements `wf worker [-temporal-address HOST:PORT] [-namespace NS]
// [-task-queue Q] [-parallelism N] [-metrics-addr ADDR] [-metrics-file PATH]
// [DIR]`.
func (cmd *WorkerCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("worker", "wf worker [options] [DIR]",
		"Run a Temporal worker: it runs the wf interpreter of the instances that\nwf apply -engine temporal starts, and the exec and http attempts routed to\nits task queue, with DIR (default \".\") as the checkout exec activities run\nin. Start as many workers on as many machines as you like, each with the\nsame checkout. Ctrl-C stops it; attempts it was running are retried on\nanother worker with the same idempotency key.")
	cmd.engine.registerConn(fs)
	fs.StringVar(&cmd.engine.taskQueue, "task-queue", "", "Temporal task `QUEUE` to poll (default wf)")
	fs.IntVar(&cmd.parallelism, "parallelism", defaultParallelism, "at most `N` attempts at once on this worker")
	cmd.metrics.register(fs)
	dir, abs, err := parseConfigDir(fs, args)
	if err != nil {
		return err
	}
	if cmd.parallelism < 1 {
		return usageErr(fs, "-parallelism must be at least 1")
	}
	// A taken port or an unwritable path fails the worker before it polls.
	if err := cmd.metrics.open(c.Stderr); err != nil {
		return err
	}
	// The worker's view of the attempts it runs feeds the metrics: the
	// same events as a local apply's, published without blocking.
	bus := event.NewBus()
	cmd.metrics.follow(bus)
	defer cmd.metrics.close(c.Stderr)
	defer bus.Close()
	opts, err := c.temporalOptions(&cmd.engine)
	if err != nil {
		return err
	}
	opts.Logger = wftemporal.WarnLogger(c.Stderr)
	cl, err := wftemporal.Dial(ctx, opts)
	if err != nil {
		return err
	}
	defer cl.Close()
	runner := activity.NewRunner(activity.Options{Now: c.Now, BaseEnv: nonNil(c.Environ), Parallelism: cmd.parallelism})
	defer runner.Close()
	host, _ := os.Hostname()
	identity := fmt.Sprintf("wf-worker %d@%s", os.Getpid(), host)
	w := wftemporal.NewWorker(cl.SDK, &wftemporal.Attempts{Runner: runner, Dir: abs, Identity: identity, Events: bus, Now: c.Now}, wftemporal.WorkerOptions{
		TaskQueue:   cmd.engine.queue(),
		Parallelism: cmd.parallelism,
		Identity:    identity,
	})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on Temporal at %s: %w", cl.Address(), err)
	}
	fmt.Fprintf(c.Stderr, "wf worker: polling task queue %q of namespace %q on %s; attempts run in %s. Ctrl-C stops.\n",
		cmd.engine.queue(), cl.Namespace(), cl.Address(), dir)
	if cmd.metrics.server != nil {
		fmt.Fprintf(c.Stderr, "wf worker: serving metrics at http://%s/metrics\n", cmd.metrics.server.Addr())
	}
	signals := make(chan os.Signal, 2)
	if c.Notify != nil {
		stop := c.Notify(signals)
		defer stop()
	}
	select {
	case <-signals:
	case <-ctx.Done():
	}
	fmt.Fprintln(c.Stderr, "wf worker: stopping: running attempts get 10s to finish, then they are cancelled and retried on another worker...")
	w.Stop()
	return nil
}
