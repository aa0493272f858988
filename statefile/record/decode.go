package record

import (
	"bytes"
	"fmt"
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
//
// This file holds the reader and the field iterator; decode_values.go the
// values (strings, numbers, times, raw JSON), decode_records.go the record
// types.

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
