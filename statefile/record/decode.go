package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// A hand-written, single-pass JSON decoder for the record types. Start-up
// decodes every activity with a pending timer, and encoding/json's
// reflection made that the bulk of reopening a store with 100,000 timers.
//
// It reads what Encode (encoding/json) writes and is stricter than
// encoding/json elsewhere: field names match exactly, a field may appear
// once, unknown fields, invalid UTF-8, fractional or exponent integers and
// trailing data are errors. Whatever it accepts, encoding/json accepts with
// the same result; the FuzzDecode* tests check that.

const maxDepth = 1000

type decoder struct {
	b []byte
	i int
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", d.i, fmt.Sprintf(format, args...))
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

func (d *decoder) expect(c byte) error {
	if d.peek() != c {
		if d.i >= len(d.b) {
			return d.errorf("unexpected end of input, want %q", c)
		}
		return d.errorf("unexpected %q, want %q", d.b[d.i], c)
	}
	d.i++
	return nil
}

func (d *decoder) literal(lit string) bool {
	d.ws()
	if bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		d.i += len(lit)
		return true
	}
	return false
}

// null consumes a null literal if one is next.
func (d *decoder) null() bool { return d.literal("null") }

// end checks that only whitespace remains.
func (d *decoder) end() error {
	d.ws()
	if d.i != len(d.b) {
		return d.errorf("trailing data after the record")
	}
	return nil
}

// fields iterates an object's members without closures or allocations:
//
//	var f fields
//	for f.init(d); f.next(); {
//		switch f.name { ... }   // each case consumes the value
//	}
//	if f.err != nil { ... }
//
// Duplicate names are refused: encoding/json would merge them in ways that
// are easy to get wrong, and Encode never writes them.
type fields struct {
	d     *decoder
	key   []byte // the current field's name
	err   error
	first bool
	done  bool
	seen  [24][]byte
	nseen int
	// prints has a bit set for each name's fingerprint.
	prints uint64
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func lastByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[len(b)-1]
}

func (f *fields) init(d *decoder) {
	*f = fields{d: d, first: true}
	f.err = d.expect('{')
}

func (f *fields) next() bool {
	d := f.d
	if f.err != nil || f.done {
		return false
	}
	switch c := d.peek(); {
	case c == '}':
		d.i++
		f.done = true
		return false
	case f.first:
	case c == ',':
		d.i++
	default:
		f.err = d.errorf("want ',' or '}' after field %q", f.key)
		return false
	}
	f.first = false
	raw, err := d.strBytes()
	if err != nil {
		f.err = err
		return false
	}
	// A cheap fingerprint of each name seen so far: only a name whose
	// fingerprint was seen before is compared with the others.
	bit := uint64(1) << ((uint(len(raw))*7 + uint(firstByte(raw))*3 + uint(lastByte(raw))) & 63)
	if f.prints&bit != 0 {
		for _, s := range f.seen[:f.nseen] {
			if bytes.Equal(s, raw) {
				f.err = d.errorf("duplicate field %q", raw)
				return false
			}
		}
	}
	f.prints |= bit
	if f.nseen == len(f.seen) {
		f.err = d.errorf("too many fields")
		return false
	}
	f.seen[f.nseen] = raw
	f.nseen++
	f.key = raw
	if err := d.expect(':'); err != nil {
		f.err = err
		return false
	}
	return true
}

// fail records a field's error and stops the iteration.
func (f *fields) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

func (f *fields) unknown() {
	f.fail(f.d.errorf("unknown field %q", f.key))
}

// array decodes [v, ...], calling elem for each value.
func (d *decoder) array(elem func(d *decoder) error) error {
	if err := d.expect('['); err != nil {
		return err
	}
	if d.peek() == ']' {
		d.i++
		return nil
	}
	for {
		if err := elem(d); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return nil
		default:
			return d.errorf("want ',' or ']' in array")
		}
	}
}

// str decodes a string. null is refused here; callers that allow it check
// first.
func (d *decoder) str() (string, error) {
	b, err := d.strBytes()
	if err != nil {
		return "", err
	}
	return intern(b), nil
}

// strBytes decodes a string; without escapes the result aliases the input.
func (d *decoder) strBytes() ([]byte, error) {
	if err := d.expect('"'); err != nil {
		return nil, err
	}
	start := d.i
	ascii := true
	// Fast path: no escapes.
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			// Names, keys and times are ASCII: only other strings need
			// the UTF-8 check.
			if !ascii && !utf8.Valid(s) {
				return nil, d.errorf("invalid UTF-8 in string")
			}
			return s, nil
		case c >= utf8.RuneSelf:
			ascii = false
		case c == '\\':
			return d.strSlow(start)
		case c < 0x20:
			return nil, d.errorf("control character in string")
		}
		d.i++
	}
	return nil, d.errorf("unterminated string")
}

func (d *decoder) strSlow(start int) ([]byte, error) {
	out := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(out) {
				return nil, d.errorf("invalid UTF-8 in string")
			}
			return out, nil
		case c < 0x20:
			return nil, d.errorf("control character in string")
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, d.errorf("unterminated escape")
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, d.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// As encoding/json: a valid pair is one rune, anything
				// else is U+FFFD.
				r2 := rune(-1)
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					var ok2 bool
					if r2, ok2 = d.hex4(); !ok2 {
						return nil, d.errorf("bad \\u escape")
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						out = utf8.AppendRune(out, dec)
						continue
					}
					d.i = save
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, d.errorf("bad escape \\%c", e)
		}
	}
	return nil, d.errorf("unterminated string")
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	d.i += 4
	return r, true
}

// integer decodes a JSON integer (no fraction or exponent) into an int64.
func (d *decoder) integer() (int64, error) {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	switch {
	case d.i == digits:
		return 0, d.errorf("want an integer")
	case d.b[digits] == '0' && d.i-digits > 1:
		return 0, d.errorf("leading zero in number")
	case d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E'):
		return 0, d.errorf("want an integer, not a fraction")
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil {
		return 0, d.errorf("%v", err)
	}
	return n, nil
}

// intField decodes an int field; null leaves it unchanged, as in
// encoding/json.
func (d *decoder) intField(p *int) error {
	if d.null() {
		return nil
	}
	n, err := d.integer()
	if err != nil {
		return err
	}
	if int64(int(n)) != n {
		return d.errorf("number %d overflows int", n)
	}
	*p = int(n)
	return nil
}

func (d *decoder) durationField(p *time.Duration) error {
	if d.null() {
		return nil
	}
	n, err := d.integer()
	if err != nil {
		return err
	}
	*p = time.Duration(n)
	return nil
}

func (d *decoder) strField(p *string) error {
	if d.null() {
		return nil
	}
	s, err := d.str()
	if err != nil {
		return err
	}
	*p = s
	return nil
}

func (d *decoder) boolField(p *bool) error {
	switch {
	case d.null():
	case d.literal("true"):
		*p = true
	case d.literal("false"):
		*p = false
	default:
		return d.errorf("want true or false")
	}
	return nil
}

// timeField decodes with time.Time's own UnmarshalJSON so the accepted
// forms are exactly encoding/json's.
func (d *decoder) timeField(p *time.Time) error {
	if d.null() {
		return nil
	}
	d.ws()
	start := d.i
	if _, err := d.strBytes(); err != nil {
		return err
	}
	if err := p.UnmarshalJSON(d.b[start:d.i]); err != nil {
		return d.errorf("%v", err)
	}
	return nil
}

// raw validates any JSON value and returns a copy of its bytes.
func (d *decoder) raw() (json.RawMessage, error) {
	d.ws()
	start := d.i
	if err := d.skip(0); err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), d.b[start:d.i]...), nil
}

func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return d.errorf("nested too deeply")
	}
	switch c := d.peek(); {
	case c == '{':
		var f fields
		for f.init(d); f.next(); {
			f.fail(d.skip(depth + 1))
		}
		return f.err
	case c == '[':
		return d.array(func(d *decoder) error { return d.skip(depth + 1) })
	case c == '"':
		_, err := d.str()
		return err
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	case d.literal("true"), d.literal("false"), d.literal("null"):
		return nil
	case c == 0:
		return d.errorf("unexpected end of input")
	default:
		return d.errorf("unexpected %q", c)
	}
}

// number validates a JSON number of any form.
func (d *decoder) number() error {
	digits := func() int {
		n := 0
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return d.errorf("bad number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return d.errorf("bad number")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return d.errorf("bad number")
		}
	}
	return nil
}

// intern returns the constant for a known enum value so that decoding
// statuses, outcomes and kinds does not allocate.
// known returns the constant equal to b, if b is one of the few values
// most records hold, and ok false otherwise.
func known(b []byte) (string, bool) {
	switch string(b) {
	case "":
		return "", true
	case string(StatusPending):
		return string(StatusPending), true
	case string(StatusRunning):
		return string(StatusRunning), true
	case string(StatusWaiting):
		return string(StatusWaiting), true
	case string(StatusSucceeded):
		return string(StatusSucceeded), true
	case string(StatusFailed):
		return string(StatusFailed), true
	case string(StatusSkipped):
		return string(StatusSkipped), true
	case string(OutcomeInterrupted):
		return string(OutcomeInterrupted), true
	case string(TimerRetry):
		return string(TimerRetry), true
	case string(TimerBudget):
		return string(TimerBudget), true
	case string(TimerSleep):
		return string(TimerSleep), true
	case "policy":
		return "policy", true
	case "server":
		return "server", true
	case "manual":
		return "manual", true
	}
	return "", false
}

// intern returns b as a string, a constant for the common values.
func intern(b []byte) string {
	if s, ok := known(b); ok {
		return s
	}
	return string(b)
}

func (d *decoder) errorObj(p **Error) error {
	if d.null() {
		*p = nil
		return nil
	}
	e := &Error{}
	var f fields
	for f.init(d); f.next(); {
		switch string(f.key) {
		case "type":
			f.fail(d.strField(&e.Type))
		case "message":
			f.fail(d.strField(&e.Message))
		case "non_retryable":
			f.fail(d.boolField(&e.NonRetryable))
		default:
			f.unknown()
		}
	}
	if f.err != nil {
		return f.err
	}
	*p = e
	return nil
}

func (d *decoder) timerObj(p **Timer) error {
	if d.null() {
		*p = nil
		return nil
	}
	t := &Timer{}
	var f fields
	for f.init(d); f.next(); {
		switch string(f.key) {
		case "kind":
			f.fail(d.strField((*string)(&t.Kind)))
		case "fire_at":
			f.fail(d.timeField(&t.FireAt))
		case "attempt":
			f.fail(d.intField(&t.Attempt))
		case "set":
			f.fail(d.timeField(&t.Set))
		case "delay":
			f.fail(d.durationField(&t.Delay))
		case "source":
			f.fail(d.strField(&t.Source))
		default:
			f.unknown()
		}
	}
	if f.err != nil {
		return f.err
	}
	*p = t
	return nil
}

// top starts the fields of a whole record. A top-level null leaves the
// record zero, as in encoding/json: f then yields no fields.
func (d *decoder) top(f *fields) {
	if d.null() {
		*f = fields{d: d, done: true}
		return
	}
	f.init(d)
}

// finish ends a whole record: a field's error, else anything after it.
func (d *decoder) finish(f *fields) error {
	if f.err != nil {
		return f.err
	}
	return d.end()
}

func decodeInstance(b []byte, r *Instance) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "workflow":
			f.fail(d.strField(&r.Workflow))
		case "key":
			f.fail(d.strField(&r.Key))
		case "created":
			f.fail(d.timeField(&r.Created))
		case "updated":
			f.fail(d.timeField(&r.Updated))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

func decodeActivity(b []byte, r *Activity) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "workflow":
			f.fail(d.strField(&r.Workflow))
		case "instance":
			f.fail(d.strField(&r.Instance))
		case "name":
			f.fail(d.strField(&r.Name))
		case "generation":
			f.fail(d.intField(&r.Generation))
		case "def_hash":
			f.fail(d.strField(&r.DefHash))
		case "idempotency_key":
			f.fail(d.strField(&r.IdempotencyKey))
		case "status":
			f.fail(d.strField((*string)(&r.Status)))
		case "attempts":
			f.fail(d.intField(&r.Attempts))
		case "rule_counts":
			f.fail(d.intsField(&r.RuleCounts))
		case "interrupted":
			f.fail(d.intField(&r.Interrupted))
		case "first_start":
			f.fail(d.timeField(&r.FirstStart))
		case "last_delay":
			f.fail(d.durationField(&r.LastDelay))
		case "timer":
			f.fail(d.timerObj(&r.Timer))
		case "outputs":
			raw, err := d.raw()
			r.Outputs = raw
			f.fail(err)
		case "last_error":
			f.fail(d.errorObj(&r.LastError))
		case "fail_reason":
			f.fail(d.strField(&r.FailReason))
		case "finished":
			f.fail(d.timeField(&r.Finished))
		case "heartbeat_details":
			f.fail(d.strField(&r.HeartbeatDetails))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

func decodeAttempt(b []byte, r *Attempt) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "workflow":
			f.fail(d.strField(&r.Workflow))
		case "instance":
			f.fail(d.strField(&r.Instance))
		case "activity":
			f.fail(d.strField(&r.Activity))
		case "generation":
			f.fail(d.intField(&r.Generation))
		case "number":
			f.fail(d.intField(&r.Number))
		case "idempotency_key":
			f.fail(d.strField(&r.IdempotencyKey))
		case "start":
			f.fail(d.timeField(&r.Start))
		case "end":
			f.fail(d.timeField(&r.End))
		case "outcome":
			f.fail(d.strField((*string)(&r.Outcome)))
		case "error":
			f.fail(d.errorObj(&r.Error))
		case "wait":
			f.fail(d.durationField(&r.Wait))
		case "has_wait":
			f.fail(d.boolField(&r.HasWait))
		case "wait_source":
			f.fail(d.strField(&r.WaitSource))
		case "fired_by":
			f.fail(d.strField(&r.FiredBy))
		case "output":
			f.fail(d.outputObj(&r.Output))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

func (d *decoder) outputObj(p **Output) error {
	if d.null() {
		*p = nil
		return nil
	}
	o := &Output{}
	var f fields
	for f.init(d); f.next(); {
		switch string(f.key) {
		case "stdout":
			f.fail(d.strField(&o.Stdout))
		case "stdout_bytes":
			f.fail(d.intField(&o.StdoutBytes))
		case "stderr":
			f.fail(d.strField(&o.Stderr))
		case "stderr_bytes":
			f.fail(d.intField(&o.StderrBytes))
		case "body":
			f.fail(d.strField(&o.Body))
		case "body_bytes":
			f.fail(d.intField(&o.BodyBytes))
		default:
			f.unknown()
		}
	}
	if f.err != nil {
		return f.err
	}
	*p = o
	return nil
}

func decodeBudget(b []byte, r *Budget) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "name":
			f.fail(d.strField(&r.Name))
		case "stamps":
			f.fail(d.timesField(&r.Stamps))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

// intsField decodes an []int; null makes it nil, [] empty, as in
// encoding/json.
func (d *decoder) intsField(p *[]int) error {
	if d.null() {
		*p = nil
		return nil
	}
	out := []int{}
	err := d.array(func(d *decoder) error {
		var n int
		err := d.intField(&n)
		out = append(out, n)
		return err
	})
	*p = out
	return err
}

func (d *decoder) timesField(p *[]time.Time) error {
	if d.null() {
		*p = nil
		return nil
	}
	out := []time.Time{}
	err := d.array(func(d *decoder) error {
		var t time.Time
		err := d.timeField(&t)
		out = append(out, t)
		return err
	})
	*p = out
	return err
}

func decodeBreaker(b []byte, r *Breaker) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "name":
			f.fail(d.strField(&r.Name))
		case "state":
			f.fail(d.strField(&r.State))
		case "since":
			f.fail(d.timeField(&r.Since))
		case "half_open_at":
			f.fail(d.timeField(&r.HalfOpenAt))
		case "window":
			f.fail(d.bucketsField(&r.Window))
		case "trial_successes":
			f.fail(d.intField(&r.TrialSuccesses))
		case "epoch":
			f.fail(d.intField(&r.Epoch))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

// bucketsField decodes a breaker's window; null makes it nil, [] empty.
func (d *decoder) bucketsField(p *[]BreakerBucket) error {
	if d.null() {
		*p = nil
		return nil
	}
	out := []BreakerBucket{}
	err := d.array(func(d *decoder) error {
		var bk BreakerBucket
		var f fields
		for f.init(d); f.next(); {
			switch string(f.key) {
			case "start":
				f.fail(d.timeField(&bk.Start))
			case "successes":
				f.fail(d.intField(&bk.Successes))
			case "failures":
				f.fail(d.intField(&bk.Failures))
			default:
				f.unknown()
			}
		}
		out = append(out, bk)
		return f.err
	})
	*p = out
	return err
}
