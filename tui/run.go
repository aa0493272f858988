package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/wf-engine/wf/executor/event"
)

// feedInterval paces event batches into the program. Events keep queueing
// in the subscription meanwhile and arrive as one batch, so a burst of
// thousands of events costs a handful of renders.
const feedInterval = 50 * time.Millisecond

// Run shows the dashboard until run_completed arrives (after showing the
// final frame), the user presses q (or ctrl+c in a read-only view), the
// subscription ends or ctx is done. It renders inline, not in the alternate
// screen, so the final frame stays in the terminal. SIGINT is left to the
// caller: in the terminal ctrl+c arrives as a key and goes to the
// Controller. A nil in disables keyboard input.
func Run(ctx context.Context, sub *event.Subscription, opts Options, in io.Reader, out io.Writer) (Final, error) {
	m := NewModel(opts)
	p := tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(out), tea.WithoutSignalHandler())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
