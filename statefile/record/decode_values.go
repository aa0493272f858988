package record

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON values the record decoder reads: strings (with escapes as
// encoding/json has them), integers, booleans, times, and raw values that
// are only validated.

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

// intern returns b as a string, a constant for the common values (so
// that decoding statuses, outcomes and kinds does not allocate).
func intern(b []byte) string {
	if s, ok := known(b); ok {
		return s
	}
	return string(b)
}
