package activity

import (
	"slices"
	"strconv"

	"github.com/wf-engine/wf/config/jsontext"
)

// appendPlainJSON appends o as json.Marshal encodes it, when every string
// in it (header names and values, body) is plain and its result is plain
// compact JSON; ok is false otherwise, and the caller uses json.Marshal.
//
// Plain is printable ASCII without '<', '>' and '&': the bytes
// encoding/json writes as they are ('"' and '\\' after a backslash). A
// plain result holds no whitespace either, so it is already as compact as
// json.Marshal makes a RawMessage.
// Marshalling through reflection cost an http attempt about as much as
// the rest of the runner's own work.
func (o *httpOutputs) appendPlainJSON(b []byte) ([]byte, bool) {
	if !jsontext.Plain(o.Body) || (o.Result != nil && (len(o.Result) == 0 || !plainRaw(o.Result))) {
		return nil, false
	}
	keys, ok := jsontext.PlainKeys(o.Headers)
	if !ok {
		return nil, false
	}
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
	b = jsontext.AppendQuoted(b, o.Body)
	b = append(b, `,"result":`...)
	if o.Result == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, o.Result...)
	}
	b = append(b, `,"body_truncated":`...)
	b = strconv.AppendBool(b, o.BodyTruncated)
	return append(b, '}'), true
}

// plainRaw reports whether json.Marshal writes the valid JSON value v as
// it is: it has no whitespace (compacting removes it between tokens), no
// '<', '>' or '&' and nothing but ASCII (escaping rewrites those, and
// U+2028 and U+2029, in strings).
func plainRaw(v []byte) bool {
	for _, c := range v {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
