package core

import (
	"github.com/wf-engine/wf/config"
)

// Secrets never reach the state or the events: what an attempt prints and
// the errors it reports have every sensitive value of the configuration
// (and of the activity's own block: values derived from sensitive
// variables, query parameters and headers named like secrets) replaced
// by "(sensitive)" before the core records or emits anything of it.

// setRedactor gives a the redactor of its resolved block.
func (c *Core) setRedactor(a *act, res *config.Resolved) {
	if len(res.Sensitive) == 0 {
		a.red = a.in.red
		return
	}
	a.red = config.NewRedactor(a.in.wf.Sensitive, res.Sensitive)
}

// redact removes a's secrets from an attempt's result.
func (c *Core) redact(a *act, res Result) Result {
	if a.red == nil {
		return res
	}
	res.Outputs = a.red.JSON(res.Outputs)
	// What it printed is then read from the redacted outputs.
	res.Printed = Printed{}
	if res.Failure != nil {
		f := *res.Failure
		f.Message = a.red.String(f.Message)
		res.Failure = &f
	}
	return res
}
