package planner

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
)

// ANSI styles of the plan symbols.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

func actionStyle(a Action) string {
	switch a {
	case ActionRun:
		return ansiGreen
	case ActionRerun:
		return ansiYellow
	case ActionResume:
		return ansiCyan
	case ActionRetryFailed:
		return ansiRed
	}
	return ansiDim
}

// Render writes the plan the way `wf plan` shows it: per instance with
// changes, one line per activity with its symbol and reason and the retry
// schedule of everything that will run; an instance with nothing to do is
// a single "No changes." line; the summary line closes a plan with changes.
// ANSI colours are used only when color is set.
func Render(w io.Writer, p *Plan, color bool) error {
	bw := bufio.NewWriter(w)
	paint := func(style, s string) string {
		if !color {
			return s
		}
		return style + s + ansiReset
	}
	if len(p.Instances) == 0 {
		fmt.Fprintln(bw, "No changes. The configuration declares no workflows to plan.")
		return flush(bw)
	}
	if !p.HasChanges() {
		for _, ip := range p.Instances {
			fmt.Fprintf(bw, "No changes. Workflow instance %s is up to date.\n", ip.Address())
		}
		return flush(bw)
	}
	for _, ip := range p.Instances {
		if !ip.HasChanges() {
			fmt.Fprintf(bw, "No changes. Workflow instance %s is up to date.\n\n", ip.Address())
			continue
		}
		fmt.Fprintln(bw, paint(ansiBold, "Workflow instance "+ip.Address()+":"))
		for _, ap := range ip.Activities {
			line := fmt.Sprintf("%s activity.%s (%s)", ap.Action.Symbol(), ap.Name, ap.Kind)
			if ap.Action == ActionUnchanged {
				fmt.Fprintf(bw, "  %s\n", paint(ansiDim, line))
				continue
			}
			if ap.Reason != "" {
				fmt.Fprintf(bw, "  %s  %s\n", paint(actionStyle(ap.Action), line), paint(ansiDim, "# "+ap.Reason))
			} else {
				fmt.Fprintf(bw, "  %s\n", paint(actionStyle(ap.Action), line))
			}
			for _, l := range retryLines(ap) {
				fmt.Fprintf(bw, "      %s\n", l)
			}
			for _, bp := range ap.Breakers {
				fmt.Fprintf(bw, "      %s\n", breakerLine(bp, p.Created))
			}
		}
		fmt.Fprintln(bw)
	}
	run, rerun, resume, unchanged := p.Counts()
	fmt.Fprintf(bw, "%s %d to run, %d to re-run, %d to resume, %d unchanged.\n",
		paint(ansiBold, "Plan:"), run, rerun, resume, unchanged)
	return flush(bw)
}

func flush(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}

// retryLines is the schedule preview of an activity: one line per rule,
// "no retries" without any (except for sleeps, which do not fail).
func retryLines(ap ActivityPlan) []string {
	if len(ap.Rules) == 0 {
		if ap.Kind == string(config.KindSleep) {
			return nil
		}
		return []string{"retry: no retries"}
	}
	out := make([]string, len(ap.Rules))
	for i, r := range ap.Rules {
		prefix := "retry: "
		if len(r.On) > 0 {
			prefix = "retry on " + strings.Join(r.On, ", ") + ": "
		}
		out[i] = prefix + PreviewText(r.Preview)
	}
	return out
}

// PreviewText describes a retry schedule in one line, e.g. "5 attempts,
// waits 1s 2s 4s 8s, at most 15s of waiting".
func PreviewText(pv retry.Preview) string {
	var parts []string
	switch pv.Attempts {
	case 0:
		parts = append(parts, "unlimited attempts")
	case 1:
		parts = append(parts, "1 attempt")
	default:
		parts = append(parts, strconv.Itoa(pv.Attempts)+" attempts")
	}
	if len(pv.Waits) > 0 {
		ws := make([]string, len(pv.Waits), len(pv.Waits)+1)
		for i, d := range pv.Waits {
			ws[i] = formatDuration(d)
		}
		if pv.More {
			ws = append(ws, "...")
		}
		parts = append(parts, "waits "+strings.Join(ws, " "))
	}
	if pv.TotalWait > 0 {
		parts = append(parts, "at most "+formatDuration(pv.TotalWait)+" of waiting")
	}
	switch pv.Jitter.Mode {
	case retry.JitterFull, retry.JitterEqual, retry.JitterDecorrelated:
		parts = append(parts, string(pv.Jitter.Mode)+" jitter")
	case retry.JitterFraction:
		parts = append(parts, strconv.FormatFloat(pv.Jitter.Fraction*100, 'f', -1, 64)+"% jitter")
	}
	if pv.Expiration > 0 {
		parts = append(parts, "expires after "+formatDuration(pv.Expiration))
	}
	return strings.Join(parts, ", ")
}
