package config

import "github.com/wf-engine/wf/config/jsontext"

// appendExec appends the encoding json.Marshal gives the Resolved that
// Hash marshals when r is an exec block (its Dir replaced by the written
// directory, "." when none); ok is false for the other kinds. Through
// reflection it was 4 % of the engine's CPU per attempt of 1,000 `exec
// true` (every first attempt of an activity computes its hash).
func appendExec(b []byte, r *Resolved) ([]byte, bool) {
	e := r.Exec
	if e == nil || r.HTTP != nil || r.Sleep != nil {
		return nil, false
	}
	b = append(b, `{"exec":{`...)
	if len(e.Command) > 0 {
		b = append(b, `"command":[`...)
		for i, arg := range e.Command {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, arg)
		}
		b = append(b, "],"...)
	}
	if e.Script != "" {
		b = append(b, `"script":`...)
		b = jsontext.AppendString(b, e.Script)
		b = append(b, ',')
	}
	if len(e.Env) > 0 {
		b = append(b, `"env":`...)
		b = jsontext.AppendObject(b, e.Env, jsontext.SortedKeys(e.Env))
		b = append(b, ',')
	}
	dir := e.WrittenDir
	if dir == "" {
		dir = "."
	}
	b = append(b, `"dir":`...)
	b = jsontext.AppendString(b, dir)
	return append(b, "}}"...), true
}
