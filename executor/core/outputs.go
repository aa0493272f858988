package core

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
)

// A workflow output is evaluated as soon as every activity it refers to
// has ended (in this run, or unchanged from before), and said once in an
// output event: with its value, or without it when it is sensitive.
// Outputs whose activities never end in the run are not said.

type outState struct {
	o    *config.Output
	done bool
}

// emitOutputs evaluates the outputs that have become known.
func (c *Core) emitOutputs() {
	for _, in := range c.insts {
		for _, os := range in.outs {
			if os.done {
				continue
			}
			vals, ready := c.outputInputs(in, os.o)
			if !ready {
				continue
			}
			os.done = true
			ev := event.Event{Time: c.now, Type: event.OutputKnown, Workflow: in.wf.Name, Instance: in.addr}
			v, diags := os.o.Eval(vals)
			if diags.HasErrors() {
				ev.Value = &event.NamedValue{Name: os.o.Name, Sensitive: os.o.Sensitive}
				ev.Error = &event.Error{Type: "config", Message: in.red.String(diagText(diags))}
			} else {
				ev.Value = &event.NamedValue{Name: os.o.Name, Sensitive: v.Sensitive}
				if !v.Sensitive {
					ev.Value.Value = v.Value
				}
			}
			c.emit(ev)
		}
	}
}

// outputInputs returns the values of what o refers to, once all of it has
// ended.
func (c *Core) outputInputs(in *inst, o *config.Output) (map[string]cty.Value, bool) {
	vals := make(map[string]cty.Value, len(o.Deps))
	for _, dep := range o.Deps {
		n := in.byName[dep]
		if n == nil || n.phase != phaseDone {
			return nil, false
		}
		v, err := c.upstreamValue(n, false)
		if err != nil {
			return nil, false
		}
		vals[dep] = v
	}
	return vals, true
}
