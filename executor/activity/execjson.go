package activity

import (
	"slices"
	"strconv"

	"github.com/wf-engine/wf/config/jsontext"
)

// appendJSON appends o as json.Marshal encodes it, without reflection (as
// httpOutputs.appendJSON does, for the same reason: it is written on
// every attempt). Its error is json.Marshal's for a result that is not
// valid JSON, which the runner never produces.
func (o *execOutputs) appendJSON(b []byte) ([]byte, error) {
	// The size of the encoding, but for escapes: one allocation.
	b = slices.Grow(b, 56+len(o.Stdout)+len(o.Stderr)+len(o.Result))
	b = append(b, `{"stdout":`...)
	b = jsontext.AppendString(b, o.Stdout)
	b = append(b, `,"stderr":`...)
	b = jsontext.AppendString(b, o.Stderr)
	b = append(b, `,"exit_code":`...)
	b = strconv.AppendInt(b, int64(o.ExitCode), 10)
	b = append(b, `,"result":`...)
	b, err := jsontext.AppendRaw(b, o.Result)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}
