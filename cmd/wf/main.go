// Command wf is a declarative workflow engine: workflows live in *.wf.hcl
// files, `wf plan` shows what would run and how it would be retried, and
// `wf apply` runs it durably.
//
// This package holds flags and wiring only; every command is a type with its
// own flag.FlagSet and a Run(ctx, args) method.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Signals are not turned into a cancelled context here: wf apply needs
	// to tell the first Ctrl-C (stop starting attempts) from the second
	// (cancel them), so it watches the signals itself.
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}

// notifySignals is what the real binary uses to receive SIGINT and SIGTERM.
func notifySignals(c chan<- os.Signal) (stop func()) {
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	return func() { signal.Stop(c) }
}
