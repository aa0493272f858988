// Package jsontext writes JSON exactly as encoding/json does, without its
// reflection: for the encodings that must be the bytes json.Marshal gives
// (records and definition hashes stored in state, an attempt's outputs)
// and are written on every attempt. Its fuzz tests hold every function to
// json.Marshal.
package jsontext

import (
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// plainByte marks the ASCII bytes a JSON string holds as they are.
var plainByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as json.Marshal writes a string: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid
// UTF-8 replaced by U+FFFD.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainByte[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendCompact appends src as json.Marshal writes a json.RawMessage:
// validated (the error is json.Marshal's words), whitespace outside
// strings removed, HTML characters and U+2028/U+2029 escaped.
func AppendCompact(b, src []byte) ([]byte, error) {
	if !json.Valid(src) {
		return b, errors.New("json: error calling MarshalJSON for type json.RawMessage: invalid JSON")
	}
	inString, escaped := false, false
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
			i += 2
			start = i + 1
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			b = append(b, src[start:i]...)
			start = i + 1
		}
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		}
	}
	return append(b, src[start:]...), nil
}

// AppendRaw appends a json.RawMessage field's value as json.Marshal
// writes it: null when raw is nil, else AppendCompact.
func AppendRaw(b, raw []byte) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	return AppendCompact(b, raw)
}

// SortedKeys returns m's keys in the order encoding/json writes them.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// AppendObject appends m as json.Marshal writes a map[string]string,
// given its keys from SortedKeys.
func AppendObject(b []byte, m map[string]string, keys []string) []byte {
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':')
		b = AppendString(b, m[k])
	}
	return append(b, '}')
}
