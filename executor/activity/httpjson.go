package activity

import (
	"slices"
	"strconv"
	"strings"
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
	if !plainString(o.Body) || (o.Result != nil && (len(o.Result) == 0 || !plainRaw(o.Result))) {
		return nil, false
	}
	keys := make([]string, 0, len(o.Headers))
	// The size of the encoding, but for escapes: one allocation.
	size := 96 + len(o.Body) + len(o.Result)
	for k, v := range o.Headers {
		if !plainString(k) || !plainString(v) {
			return nil, false
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 6
	}
	b = slices.Grow(b, size)
	// encoding/json writes a map's keys in sorted order.
	slices.Sort(keys)
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, int64(o.Status), 10)
	b = append(b, `,"headers":`...)
	if o.Headers == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendQuoted(b, k)
			b = append(b, ':')
			b = appendQuoted(b, o.Headers[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"body":`...)
	b = appendQuoted(b, o.Body)
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

// plainString reports whether encoding/json writes s between its quotes
// as it is but for '"' and '\\' (each after a backslash): printable
// ASCII other than '<', '>' and '&'.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
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

// appendQuoted appends the plain string s as a JSON string.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for {
		i := strings.IndexAny(s, `"\`)
		if i < 0 {
			break
		}
		b = append(b, s[:i]...)
		b = append(b, '\\', s[i])
		s = s[i+1:]
	}
	b = append(b, s...)
	return append(b, '"')
}
