package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// BreakerReader is implemented by a state that keeps circuit breakers
// (statefile does). A state that does not is read as every breaker
// closed.
type BreakerReader interface {
	Breakers() (map[string]*record.Breaker, error)
}

// BreakerPlan is a circuit breaker an activity is behind, as it is at the
// planning time (SPEC §11): `breaker payment_api: closed`.
type BreakerPlan struct {
	Name string `json:"name"`
	// State is "closed", "open" or "half_open".
	State string `json:"state"`
	// HalfOpenAt is when an open breaker lets a trial call through.
	HalfOpenAt time.Time `json:"half_open_at,omitzero"`
	// Calls and Failures are the outcomes in its window (closed).
	Calls    int `json:"calls"`
	Failures int `json:"failures"`
}

// breakerStates reads the breakers of cfg as they are at now.
func breakerStates(cfg *config.Config, st StateReader, now time.Time) (map[string]BreakerPlan, hcl.Diagnostics) {
	if len(cfg.Breakers) == 0 {
		return nil, nil
	}
	var recs map[string]*record.Breaker
	if br, ok := st.(BreakerReader); ok {
		got, err := br.Breakers()
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read state", Detail: fmt.Sprintf("read circuit breakers: %v", err)}}
		}
		recs = got
	}
	out := make(map[string]BreakerPlan, len(cfg.Breakers))
	for name, b := range cfg.Breakers {
		c := retry.Circuit{State: retry.CircuitClosed}
		if r := recs[name]; r != nil {
			c = retry.Circuit{State: retry.CircuitState(r.State), Since: r.Since, HalfOpenAt: r.HalfOpenAt,
				TrialSuccesses: r.TrialSuccesses, Epoch: r.Epoch}
			for _, b := range r.Window {
				c.Buckets = append(c.Buckets, retry.Bucket{Start: b.Start, Successes: b.Successes, Failures: b.Failures})
			}
		}
		c, _ = b.At(c, now)
		bp := BreakerPlan{Name: name, State: string(c.State)}
		switch c.State {
		case retry.CircuitOpen:
			bp.HalfOpenAt = c.HalfOpenAt
		case retry.CircuitClosed:
			bp.Calls, bp.Failures = b.Calls(c, now)
		}
		out[name] = bp
	}
	return out, nil
}

// attachBreakers gives every planned activity the breakers its retry
// rules name.
func attachBreakers(p *Plan, cfg *config.Config, states map[string]BreakerPlan) {
	if len(states) == 0 {
		return
	}
	for i := range p.Instances {
		ip := &p.Instances[i]
		wf := workflowNamed(cfg, ip.Workflow)
		if wf == nil {
			continue
		}
		for j := range ip.Activities {
			ap := &ip.Activities[j]
			a := wf.Activity(ap.Name)
			if a == nil || a.Kind == config.KindSleep {
				continue
			}
			var names []string
			for _, r := range a.Rules {
				if n := r.Policy.CircuitBreaker; n != "" && !slices.Contains(names, n) {
					names = append(names, n)
					if bp, ok := states[n]; ok {
						ap.Breakers = append(ap.Breakers, bp)
					}
				}
			}
		}
	}
}

func workflowNamed(cfg *config.Config, name string) *config.Workflow {
	for _, wf := range cfg.Workflows {
		if wf.Name == name {
			return wf
		}
	}
	return nil
}

// breakerLine is the plan line of a breaker, e.g.
// "breaker payment_api: open, half-open in 12s (2025-03-04T12:00:12Z)".
func breakerLine(bp BreakerPlan, now time.Time) string {
	switch bp.State {
	case string(retry.CircuitOpen):
		return fmt.Sprintf("breaker %s: open, half-open %s", bp.Name, halfOpenText(bp.HalfOpenAt, now))
	case string(retry.CircuitHalfOpen):
		return fmt.Sprintf("breaker %s: half-open (the next attempt is a trial call)", bp.Name)
	}
	if bp.Failures > 0 {
		return fmt.Sprintf("breaker %s: closed (%d of %d recent calls failed)", bp.Name, bp.Failures, bp.Calls)
	}
	return fmt.Sprintf("breaker %s: closed", bp.Name)
}

func halfOpenText(at, now time.Time) string {
	if !at.After(now) {
		return "now"
	}
	return fmt.Sprintf("in %s (%s)", formatDuration(roundForHumans(at.Sub(now))), at.Format(time.RFC3339))
}
