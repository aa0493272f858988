package activity

import (
	"slices"
	"strconv"

	"github.com/wf-engine/wf/config/jsontext"
)

// appendJSON appends o as json.Marshal encodes it. Its error is
// json.Marshal's for a result that is not valid JSON (a caller that wants
// json.Marshal's exact error asks it). Marshalling through reflection cost
// an http attempt about as much as the rest of the runner's own work.
func (o *httpOutputs) appendJSON(b []byte) ([]byte, error) {
	keys := jsontext.SortedKeys(o.Headers)
	// The size of the encoding, but for escapes: one allocation.
	size := 96 + len(o.Body) + len(o.Result)
	for k, v := range o.Headers {
		size += len(k) + len(v) + 6
	}
	b = slices.Grow(b, size)
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, int64(o.Status), 10)
	b = append(b, `,"headers":`...)
	if o.Headers == nil {
		b = append(b, "null"...)
	} else {
		b = jsontext.AppendObject(b, o.Headers, keys)
	}
	b = append(b, `,"body":`...)
	b = jsontext.AppendString(b, o.Body)
	b = append(b, `,"result":`...)
	b, err := jsontext.AppendRaw(b, o.Result)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"body_truncated":`...)
	b = strconv.AppendBool(b, o.BodyTruncated)
	return append(b, '}'), nil
}
