package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"

	"github.com/wf-engine/wf/executor/event"
)

// feedInterval paces event batches into the program. Events keep queueing
// in the subscription meanwhile and arrive as one batch, so a burst of
// thousands of events costs a handful of renders.
const feedInterval = 50 * time.Millisecond

// queryModes asks the terminal whether it has synchronized output and
// grapheme widths; bubbletea enables them when the replies arrive.
const queryModes = ansi.RequestModeSynchronizedOutput + ansi.RequestModeUnicodeCore

// Run shows the dashboard until run_completed arrives (after showing the
// final frame), the user closes it (q or ctrl+c in a read-only view), the
// subscription ends or ctx is done. It renders inline, not in the alternate
// screen, so the final frame stays in the terminal. SIGINT is left to the
// caller: in the terminal ctrl+c arrives as a key and goes to the
// Controller. A nil in disables keyboard input.
//
// Run reads the keyboard itself instead of letting bubbletea do it, to
// change only the terminal modes the dashboard needs: keys unechoed and
// one at a time (the input side of the termios; output processing stays),
// mouse button reporting for the wheel, a hidden cursor. bubbletea's own
// reader would also push the kitty keyboard protocol and xterm's
// modifyOtherKeys, which a killed dashboard leaves behind in the terminal
// (keys then arrive as escape codes at the shell). What a kill -9 can
// still leave on (mouse reporting, the hidden cursor) `reset` turns off.
func Run(ctx context.Context, sub *event.Subscription, opts Options, in io.Reader, out io.Writer) (Final, error) {
	m := NewModel(opts)
	tty := isTerminal(in)
	m.mouse, m.queryModes = tty, tty
	p := tea.NewProgram(m, tea.WithInput(nil), tea.WithOutput(out), tea.WithoutSignalHandler())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopKeys := func() error { return nil }
	if in != nil {
		var err error
		stopKeys, err = readKeys(ctx, in, tty, p)
		if err != nil {
			return m.Final(), err
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		feed(ctx, sub, p)
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		// Quit, not Kill: a graceful exit renders the final frame.
		p.Quit()
	}()
	_, err := p.Run()
	cancel()
	wg.Wait()
	if kerr := stopKeys(); kerr != nil && err == nil {
		err = kerr
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return m.Final(), fmt.Errorf("run dashboard: %w", err)
	}
	if !m.sized {
		// Output is not a terminal, so the renderer drew nothing: leave
		// the final frame as plain text instead.
		if _, err := fmt.Fprintln(out, m.Render()); err != nil {
			return m.Final(), fmt.Errorf("write final frame: %w", err)
		}
	}
	return m.Final(), nil
}

func isTerminal(in io.Reader) bool {
	f, ok := in.(term.File)
	return ok && term.IsTerminal(f.Fd())
}

// readKeys puts a terminal's input in raw mode and forwards its keys and
// mouse events to p until stop is called, which also restores the
// terminal.
func readKeys(ctx context.Context, in io.Reader, tty bool, p *tea.Program) (stop func() error, err error) {
	restore := func() error { return nil }
	if tty {
		restore, err = rawInput(int(in.(term.File).Fd()))
		if err != nil {
			return nil, fmt.Errorf("terminal input: %w", err)
		}
	}
	cr, err := uv.NewCancelReader(in)
	if err != nil {
		_ = restore()
		return nil, fmt.Errorf("terminal input: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	events := make(chan uv.Event)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rd := uv.NewTerminalReader(cr, os.Getenv("TERM"))
		_ = rd.StreamEvents(ctx, events) // ends with ctx or the input
	}()
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case ev := <-events:
				p.Send(ev)
			case <-ctx.Done():
				return
			case <-done:
				return
			}
		}
	}()
	return func() error {
		cancel()
		cr.Cancel()
		select {
		case <-done:
		case <-time.After(500 * time.Millisecond):
			// A reader that cannot be cancelled (a pipe) stays blocked
			// until its input ends; nothing waits for it.
		}
		<-forwarded
		_ = cr.Close()
		return restore()
	}, nil
}

// feed forwards the subscription to the program in paced batches.
func feed(ctx context.Context, sub *event.Subscription, p *tea.Program) {
	for {
		batch, ok := sub.Next(ctx)
		if !ok {
			if ctx.Err() == nil {
				p.Send(streamEndMsg{})
			}
			return
		}
		p.Send(EventsMsg{Events: batch})
		t := time.NewTimer(feedInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
