// Package jsontext writes plain strings as JSON exactly as encoding/json
// does, without its reflection: for the encodings that must be the bytes
// json.Marshal gives (definition hashes stored in state, an attempt's
// outputs) and are written on every attempt.
package jsontext

import (
	"slices"
	"strings"
)

// Plain reports whether encoding/json writes s between its quotes as it
// is but for '"' and '\\' (each after a backslash): printable ASCII other
// than '<', '>' and '&' (which it escapes for HTML). Anything else goes
// to json.Marshal.
func Plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// AppendQuoted appends the Plain string s as json.Marshal writes it.
func AppendQuoted(b []byte, s string) []byte {
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

// PlainKeys returns m's keys in the order encoding/json writes them
// (sorted), and whether every key and value of m is Plain.
func PlainKeys(m map[string]string) ([]string, bool) {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if !Plain(k) || !Plain(v) {
			return nil, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, true
}

// AppendObject appends m as json.Marshal writes a map[string]string of
// Plain strings, given its keys from PlainKeys.
func AppendObject(b []byte, m map[string]string, keys []string) []byte {
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendQuoted(b, k)
		b = append(b, ':')
		b = AppendQuoted(b, m[k])
	}
	return append(b, '}')
}
