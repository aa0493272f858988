package record

import (
	"strconv"
	"time"

	"github.com/wf-engine/wf/config/jsontext"
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
	e.b = jsontext.AppendString(e.b, v)
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
	b = jsontext.AppendString(b, r.Workflow)
	b = append(b, `,"instance":`...)
	b = jsontext.AppendString(b, r.Instance)
	b = append(b, `,"activity":`...)
	b = jsontext.AppendString(b, r.Activity)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, int64(r.Generation), 10)
	b = append(b, `,"number":`...)
	b = strconv.AppendInt(b, int64(r.Number), 10)
	b = append(b, `,"idempotency_key":`...)
	b = jsontext.AppendString(b, r.IdempotencyKey)
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
	b = jsontext.AppendString(b, string(r.Outcome))
	if e := r.Error; e != nil {
		b = append(b, `,"error":{"type":`...)
		b = jsontext.AppendString(b, e.Type)
		if e.Message != "" {
			b = append(b, `,"message":`...)
			b = jsontext.AppendString(b, e.Message)
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
		b = jsontext.AppendString(b, r.WaitSource)
	}
	if r.FiredBy != "" {
		b = append(b, `,"fired_by":`...)
		b = jsontext.AppendString(b, r.FiredBy)
	}
	if o := r.Output; o != nil {
		b = append(b, `,"output":`...)
		b = appendOutput(b, o)
	}
	return append(b, '}'), nil
}

// appendOutput writes an attempt's captured output as json.Marshal does
// (each field omitted when empty).
func appendOutput(b []byte, o *Output) []byte {
	b = append(b, '{')
	open := len(b)
	if o.Stdout != "" {
		b = jsontext.AppendString(appendFieldName(b, open, "stdout"), o.Stdout)
	}
	if o.StdoutBytes != 0 {
		b = strconv.AppendInt(appendFieldName(b, open, "stdout_bytes"), int64(o.StdoutBytes), 10)
	}
	if o.Stderr != "" {
		b = jsontext.AppendString(appendFieldName(b, open, "stderr"), o.Stderr)
	}
	if o.StderrBytes != 0 {
		b = strconv.AppendInt(appendFieldName(b, open, "stderr_bytes"), int64(o.StderrBytes), 10)
	}
	if o.Body != "" {
		b = jsontext.AppendString(appendFieldName(b, open, "body"), o.Body)
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

// The sizes Encode starts a record's buffer with: about what the record
// takes, so that one allocation holds it (a fixed guess grew the buffer
// of every activity with outputs, and wasted half of an attempt's).
// Generous for plain text; escapes can still make a record grow.

// activityBinarySize is about the length of r's binary form: the bytes
// of its strings and outputs, and at most a few bytes for each length,
// number and time.
func activityBinarySize(r *Activity) int {
	n := 72 + len(r.Workflow) + len(r.Instance) + len(r.Name) + len(r.DefHash) + len(r.IdempotencyKey) +
		len(r.Status) + len(r.Outputs) + len(r.FailReason) + len(r.HeartbeatDetails) + 10*len(r.RuleCounts)
	if t := r.Timer; t != nil {
		n += 56 + len(t.Kind) + len(t.Source)
	}
	if e := r.LastError; e != nil {
		n += 8 + len(e.Type) + len(e.Message)
	}
	return n
}

// attemptJSONSize is about the length of r's JSON form: the field names
// and times of a finished attempt, its strings, and an eighth more of the
// output for escapes.
func attemptJSONSize(r *Attempt) int {
	n := 260 + len(r.Workflow) + len(r.Instance) + len(r.Activity) + len(r.IdempotencyKey) + len(r.Outcome) +
		len(r.WaitSource) + len(r.FiredBy)
	if e := r.Error; e != nil {
		n += 48 + len(e.Type) + len(e.Message) + len(e.Message)/8
	}
	if o := r.Output; o != nil {
		text := len(o.Stdout) + len(o.Stderr) + len(o.Body)
		n += 96 + text + text/8
	}
	return n
}
