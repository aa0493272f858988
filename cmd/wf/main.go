// Command wf is a declarative workflow engine: workflows live in *.wf.hcl
// files, `wf plan` shows what would run and how it would be retried, and
// `wf apply` runs it durably.
//
// This package holds flags and wiring only; every command is a type with its
// own flag.FlagSet and a Run(ctx, args) method.
//
// Flags take one dash or two (-no-color, --no-color) and may come before or
// after the positional arguments: `wf plan -no-color examples/x` and
// `wf plan examples/x -no-color` are the same. A "--" ends the flags; what
// follows is positional even when it starts with a dash.
//
// Exit codes: 0 success; 1 an error or a failed workflow; 2 from
// `wf plan -detailed-exitcode` when the plan has changes; 130 when wf apply
// was interrupted (SIGINT, SIGTERM or SIGHUP, once or twice) or detached
// (the state is saved and the next apply resumes).
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

// notifySignals is what the real binary uses to receive the signals that
// stop an apply: SIGINT (Ctrl-C), SIGTERM and SIGHUP (a closed terminal).
// The first of them stops starting attempts, the second cancels them.
func notifySignals(c chan<- os.Signal) (stop func()) {
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	return func() { signal.Stop(c) }
}

// catchBrokenPipe keeps a closed standard output or error (`wf apply -json
// | head`) from killing wf: Go's runtime dies of SIGPIPE on a write to a
// broken pipe on fd 1 or 2 unless SIGPIPE is notified; with it, the write
// returns EPIPE and the views treat that as the end of their output. It
// is caught, not ignored: an ignored disposition would be inherited by
// every exec activity, while a caught one is reset by exec. It stays
// caught until wf exits, so that the last error message cannot kill it
// either.
func catchBrokenPipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
