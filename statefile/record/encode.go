package record

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// JSON encoders for the records written on every attempt (an activity's
// binary form is in binary.go). They produce exactly the bytes
// encoding/json.Marshal produces for the same value (the tests compare the
// two on random records), without reflection: encoding every attempt
// through json.Marshal was the largest CPU cost of a commit
// (docs/performance.md). Budgets and breakers, written once per step at
// most, still go through json.Marshal.

// encoder appends JSON to b; err is the first error.
type encoder struct {
	b     []byte
	err   error
	comma bool // a field was written in the current object
}

func (e *encoder) open() {
	e.b = append(e.b, '{')
	e.comma = false
}

func (e *encoder) close() {
	e.b = append(e.b, '}')
	e.comma = true
}

// key writes `"name":` (name is a plain ASCII field name).
func (e *encoder) key(name string) {
	if e.comma {
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':')
	e.comma = true
}

func (e *encoder) str(name, v string) {
	e.key(name)
	e.b = appendJSONString(e.b, v)
}

func (e *encoder) int(name string, v int64) {
	e.key(name)
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *encoder) time(name string, t time.Time) {
	e.key(name)
	b, err := appendJSONTime(e.b, t)
	if err != nil {
		e.fail(err)
		return
	}
	e.b = b
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func appendInstance(b []byte, r *Instance) ([]byte, error) {
	e := encoder{b: b}
	e.open()
	e.str("workflow", r.Workflow)
	e.str("key", r.Key)
	e.time("created", r.Created)
	e.time("updated", r.Updated)
	e.close()
	return e.b, e.err
}

// appendAttempt, written on every attempt, appends to a local slice
// rather than through an encoder: a slice stored back through a pointer
// costs a write barrier per field while the GC marks, which on a busy
// commit path is much of the time (a fifth of the encoding's CPU).
func appendAttempt(b []byte, r *Attempt) ([]byte, error) {
	var err error
	b = append(b, `{"workflow":`...)
	b = appendJSONString(b, r.Workflow)
	b = append(b, `,"instance":`...)
	b = appendJSONString(b, r.Instance)
	b = append(b, `,"activity":`...)
	b = appendJSONString(b, r.Activity)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, int64(r.Generation), 10)
	b = append(b, `,"number":`...)
	b = strconv.AppendInt(b, int64(r.Number), 10)
	b = append(b, `,"idempotency_key":`...)
	b = appendJSONString(b, r.IdempotencyKey)
	b = append(b, `,"start":`...)
	if b, err = appendJSONTime(b, r.Start); err != nil {
		return b, err
	}
	if !r.End.IsZero() {
		b = append(b, `,"end":`...)
		if b, err = appendJSONTime(b, r.End); err != nil {
			return b, err
		}
	}
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, string(r.Outcome))
	if e := r.Error; e != nil {
		b = append(b, `,"error":{"type":`...)
		b = appendJSONString(b, e.Type)
		if e.Message != "" {
			b = append(b, `,"message":`...)
			b = appendJSONString(b, e.Message)
		}
		if e.NonRetryable {
			b = append(b, `,"non_retryable":true`...)
		}
		b = append(b, '}')
	}
	if r.Wait != 0 {
		b = append(b, `,"wait":`...)
		b = strconv.AppendInt(b, int64(r.Wait), 10)
	}
	if r.HasWait {
		b = append(b, `,"has_wait":true`...)
	}
	if r.WaitSource != "" {
		b = append(b, `,"wait_source":`...)
		b = appendJSONString(b, r.WaitSource)
	}
	if r.FiredBy != "" {
		b = append(b, `,"fired_by":`...)
		b = appendJSONString(b, r.FiredBy)
	}
	if o := r.Output; o != nil {
		b = append(b, `,"output":`...)
		b = appendOutput(b, o)
	}
	return append(b, '}'), nil
}

// appendJSONTime appends t as json.Marshal writes a time.Time.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return b, err
	}
	return append(b, '"'), nil
}

// appendOutput writes an attempt's captured output as json.Marshal does
// (each field omitted when empty).
func appendOutput(b []byte, o *Output) []byte {
	b = append(b, '{')
	open := len(b)
	if o.Stdout != "" {
		b = appendJSONString(appendFieldName(b, open, "stdout"), o.Stdout)
	}
	if o.StdoutBytes != 0 {
		b = strconv.AppendInt(appendFieldName(b, open, "stdout_bytes"), int64(o.StdoutBytes), 10)
	}
	if o.Stderr != "" {
		b = appendJSONString(appendFieldName(b, open, "stderr"), o.Stderr)
	}
	if o.StderrBytes != 0 {
		b = strconv.AppendInt(appendFieldName(b, open, "stderr_bytes"), int64(o.StderrBytes), 10)
	}
	if o.Body != "" {
		b = appendJSONString(appendFieldName(b, open, "body"), o.Body)
	}
	if o.BodyBytes != 0 {
		b = strconv.AppendInt(appendFieldName(b, open, "body_bytes"), int64(o.BodyBytes), 10)
	}
	return append(b, '}')
}

// appendFieldName writes `"name":`, after a comma unless it is the first
// field of the object opened at open.
func appendFieldName(b []byte, open int, name string) []byte {
	if len(b) > open {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func appendSpawn(b []byte, r *Spawn) ([]byte, error) {
	e := encoder{b: b}
	e.open()
	e.str("workflow", r.Workflow)
	e.str("instance", r.Instance)
	e.str("activity", r.Activity)
	e.int("generation", int64(r.Generation))
	e.int("number", int64(r.Number))
	e.int("pid", int64(r.PID))
	e.key("start_ticks")
	e.b = strconv.AppendUint(e.b, r.StartTicks, 10)
	e.str("boot_id", r.BootID)
	e.time("recorded", r.Recorded)
	e.close()
	return e.b, e.err
}

const hexDigits = "0123456789abcdef"

// plainByte marks the ASCII bytes a JSON string holds as they are.
var plainByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s as encoding/json writes a string (HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced).
func appendJSONString(b []byte, s string) []byte {
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

// appendCompactJSON appends src as encoding/json writes a RawMessage:
// validated, whitespace outside strings removed, HTML characters and
// U+2028/U+2029 escaped.
func appendCompactJSON(b, src []byte) ([]byte, error) {
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
