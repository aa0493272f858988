package planner

import (
	"bytes"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/statefile/record"
)

// breakerState is a StateReader with circuit breakers.
type breakerState struct {
	memState
	breakers map[string]*record.Breaker
}

func (b breakerState) Breakers() (map[string]*record.Breaker, error) { return b.breakers, nil }

const breakerHCL = `
circuit_breaker "payment_api" {
  minimum_calls = 4
}
circuit_breaker "ledger" {}
circuit_breaker "mail" {}
retry_policy "payment" {
  maximum_attempts = 5
  circuit_breaker  = circuit_breaker.payment_api
}
workflow "order" {
  key = "order-1001"
  activity "charge" {
    exec { command = ["true"] }
    retry = retry_policy.payment
  }
  activity "book" {
    exec { command = ["true"] }
    retry {
      maximum_attempts = 3
      circuit_breaker  = circuit_breaker.ledger
    }
  }
  activity "notify" {
    exec { command = ["true"] }
    retry {
      maximum_attempts = 3
      circuit_breaker  = circuit_breaker.mail
    }
  }
  activity "ship" {
    exec { command = ["true"] }
  }
}
`

// TestPlanShowsBreakers: each activity behind a breaker gets a line with
// the breaker's state now: open with the end of its break, half-open once
// that time has passed (as the core would find it), closed with its
// recent failures.
func TestPlanShowsBreakers(t *testing.T) {
	cfg, diags := config.LoadFiles("/cfg", map[string][]byte{"main.wf.hcl": []byte(breakerHCL)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st := breakerState{breakers: map[string]*record.Breaker{
		"payment_api": {Name: "payment_api", State: "open", Since: planNow.Add(-18 * time.Second), HalfOpenAt: planNow.Add(12 * time.Second), Epoch: 1},
		"ledger":      {Name: "ledger", State: "open", Since: planNow.Add(-time.Minute), HalfOpenAt: planNow.Add(-30 * time.Second), Epoch: 1},
		"mail": {Name: "mail", State: "closed", Window: []record.BreakerBucket{
			{Start: planNow.Add(-time.Minute), Successes: 1}, {Start: planNow.Add(-2 * time.Second), Successes: 1}, {Start: planNow.Add(-time.Second), Failures: 1}}},
	}}
	p, diags := Build(cfg, st, Options{Now: planNow})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var out bytes.Buffer
	if err := Render(&out, p, false); err != nil {
		t.Fatal(err)
	}
	golden(t, "breakers.golden", out.Bytes())

	// Never applied: every breaker is closed.
	p, _ = Build(cfg, memState{}, Options{Now: planNow})
	if bp := p.Instances[0].Activities[0].Breakers; len(bp) != 1 || bp[0].State != "closed" || bp[0].Name != "payment_api" {
		t.Fatalf("breakers of a fresh plan = %+v", bp)
	}
}
