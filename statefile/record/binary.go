package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/wf-engine/wf/config/jsontext"
)

// The binary form of an Activity. Reopening a state decodes every
// activity of every instance before the first timer can fire, and even a
// hand-written JSON decoder spends most of its time finding the ends of
// names and strings and checking them; here every field has a fixed place
// and a length, and all of a record's strings share one allocation.
//
// It holds exactly what the JSON form holds after a round trip through
// encoding/json (invalid UTF-8 replaced, the outputs compacted, times as
// RFC 3339 keeps them), so the two forms decode to the same record; the
// tests compare them on random and fuzzed records. Records written by an
// older wf (JSON, which always begins with '{', 'n' or white space) still
// decode; DecodeActivity tells the two apart by the first byte.
//
//	0    activityBinaryV1
//	     str workflow, str instance, str name, int generation,
//	     str def_hash, str idempotency_key, str status, int attempts,
//	     uint len(rule_counts), int each, int interrupted,
//	     time first_start, int last_delay,
//	     flag timer [str kind, time fire_at, int attempt, time set,
//	                 int delay, str source],
//	     bytes outputs,
//	     flag last_error [str type, str message, flag non_retryable],
//	     str fail_reason, time finished, str heartbeat_details
//
// str and bytes are a uvarint length and the bytes; int is a zig-zag
// varint, uint a uvarint, flag one byte (0 or 1). A time is one byte:
// 0 the zero time; 1 UTC, followed by int seconds since 1970 and uint
// nanoseconds; 2 another offset, followed by str RFC 3339 text.
const activityBinaryV1 = 0x01

const (
	timeZero = 0
	timeUTC  = 1
	timeText = 2
)

// appendActivityBinary appends the binary form of r. What json.Marshal
// refuses (invalid outputs, a year outside 0-9999) it refuses too.
func appendActivityBinary(b []byte, r *Activity) ([]byte, error) {
	e := binEncoder{b: append(b, activityBinaryV1)}
	e.str(r.Workflow)
	e.str(r.Instance)
	e.str(r.Name)
	e.int(int64(r.Generation))
	e.str(r.DefHash)
	e.str(r.IdempotencyKey)
	e.str(string(r.Status))
	e.int(int64(r.Attempts))
	e.uint(uint64(len(r.RuleCounts)))
	for _, n := range r.RuleCounts {
		e.int(int64(n))
	}
	e.int(int64(r.Interrupted))
	e.time(r.FirstStart, true)
	e.int(int64(r.LastDelay))
	if t := r.Timer; t != nil {
		e.flag(true)
		e.str(string(t.Kind))
		e.time(t.FireAt, false)
		e.int(int64(t.Attempt))
		e.time(t.Set, false)
		e.int(int64(t.Delay))
		e.str(t.Source)
	} else {
		e.flag(false)
	}
	if len(r.Outputs) > 0 {
		// As json.Marshal writes a RawMessage (validated, compacted).
		start := len(e.b)
		out, err := jsontext.AppendCompact(e.b, r.Outputs)
		if err != nil {
			return nil, err
		}
		v := append([]byte(nil), out[start:]...)
		e.b = out[:start]
		e.bytes(v)
	} else {
		e.uint(0)
	}
	if er := r.LastError; er != nil {
		e.flag(true)
		e.str(er.Type)
		e.str(er.Message)
		e.flag(er.NonRetryable)
	} else {
		e.flag(false)
	}
	e.str(r.FailReason)
	e.time(r.Finished, true)
	e.str(r.HeartbeatDetails)
	return e.b, e.err
}

type binEncoder struct {
	b   []byte
	err error
}

func (e *binEncoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *binEncoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }

func (e *binEncoder) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *binEncoder) bytes(v []byte) {
	e.uint(uint64(len(v)))
	e.b = append(e.b, v...)
}

// str writes s as encoding/json would leave it: each byte of invalid
// UTF-8 becomes U+FFFD.
func (e *binEncoder) str(s string) {
	if utf8.ValidString(s) {
		e.uint(uint64(len(s)))
		e.b = append(e.b, s...)
		return
	}
	v := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			v = utf8.AppendRune(v, utf8.RuneError)
		} else {
			v = append(v, s[i:i+size]...)
		}
		i += size
	}
	e.bytes(v)
}

// time writes t; omitZero says the JSON field is omitzero (a zero time
// is then absent, and decodes as time.Time{}).
func (e *binEncoder) time(t time.Time, omitZero bool) {
	if omitZero && t.IsZero() {
		e.b = append(e.b, timeZero)
		return
	}
	if _, off := t.Zone(); off/60 == 0 {
		// RFC 3339 writes a zero offset as Z, which reads back as UTC. It
		// has no seconds of offset: an offset of under a minute (only
		// historical local mean times have one) is written +00:00 with
		// the wall clock, which reads back as that wall clock in UTC
		// (encoding/json gives a zone of offset 0 instead of UTC).
		u := t.Add(time.Duration(off) * time.Second).UTC()
		if y := u.Year(); y < 0 || y > 9999 {
			e.fail(errors.New("Time.MarshalJSON: year outside of range [0,9999]"))
		}
		e.b = append(e.b, timeUTC)
		e.int(u.Unix())
		e.uint(uint64(u.Nanosecond()))
		return
	}
	text, err := t.AppendText(nil)
	if err != nil {
		e.fail(err)
		return
	}
	e.b = append(e.b, timeText)
	e.bytes(text)
}

func (e *binEncoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// decodeActivityBinary decodes the binary form (b[0] is the version).
// Its timer, last error, rule counts and outputs come from ab (nil:
// allocated one by one). shared is b as a string, or "": the record's
// strings are then substrings of string(b), if b is small enough.
func decodeActivityBinary(b []byte, shared string, r *Activity, ab *ActivityBatch) error {
	if len(b) == 0 || b[0] != activityBinaryV1 {
		return errors.New("not a binary activity record")
	}
	d := binDecoder{b: b, i: 1, s: shared}
	switch {
	case shared != "":
		if len(shared) != len(b) {
			return errors.New("the record and its shared string differ in length")
		}
	case len(b) <= sharedStringMax:
		d.s = string(b)
	}
	r.Workflow = d.str()
	r.Instance = d.str()
	r.Name = d.str()
	r.Generation = d.intN()
	r.DefHash = d.str()
	r.IdempotencyKey = d.str()
	r.Status = Status(d.str())
	r.Attempts = d.intN()
	if n := d.uint(); n > 0 {
		if n > uint64(len(b)-d.i) {
			d.fail("rule count list longer than the record")
		} else {
			r.RuleCounts = ab.ints(int(n))
			for i := range r.RuleCounts {
				r.RuleCounts[i] = d.intN()
			}
		}
	}
	r.Interrupted = d.intN()
	r.FirstStart = d.time()
	r.LastDelay = time.Duration(d.int())
	if d.flag() {
		t := ab.timer()
		t.Kind = TimerKind(d.str())
		t.FireAt = d.time()
		t.Attempt = d.intN()
		t.Set = d.time()
		t.Delay = time.Duration(d.int())
		t.Source = d.str()
		r.Timer = t
	}
	if out := d.bytes(); len(out) > 0 {
		// Only what json.Marshal writes: valid, compact JSON.
		if !isMarshaledRaw(out) {
			d.fail("outputs are not compact JSON")
		}
		r.Outputs = ab.copyBytes(out)
	}
	if d.flag() {
		er := ab.lastError()
		er.Type = d.str()
		er.Message = d.str()
		er.NonRetryable = d.flag()
		r.LastError = er
	}
	r.FailReason = d.str()
	r.Finished = d.time()
	r.HeartbeatDetails = d.str()
	if d.err == nil && d.i != len(b) {
		d.fail("trailing data after the record")
	}
	return d.err
}

// sharedStringMax bounds the records whose strings share one allocation:
// a string keeps all of it alive, and a large record is large for its
// outputs, which are copied anyway.
const sharedStringMax = 4 << 10

// binDecoder reads the binary form; s is the record as one string (or
// empty: see sharedStringMax), so that strings are substrings of it.
type binDecoder struct {
	b   []byte
	s   string
	i   int
	err error
}

func (d *binDecoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("offset %d: %s", d.i, msg)
	}
	d.i = len(d.b)
}

// uint and int take one byte, as most lengths, counts and small numbers
// are, without a call (they are inlined); a longer varint goes through
// uintSlow. They need no check of d.err: fail moves d.i to the end.
func (d *binDecoder) uint() uint64 {
	if i := d.i; i < len(d.b) {
		if v := d.b[i]; v < 0x80 {
			d.i = i + 1
			return uint64(v)
		}
	}
	return d.uintSlow()
}

// uintSlow reads a varint of more than one byte (times and durations
// are several) as binary.Uvarint does, overflow included, in the loop
// of one call instead of two.
func (d *binDecoder) uintSlow() uint64 {
	var v uint64
	for i, shift := d.i, uint(0); i < len(d.b) && shift < 64; i, shift = i+1, shift+7 {
		c := d.b[i]
		if c < 0x80 {
			if shift == 63 && c > 1 {
				break // over 64 bits
			}
			d.i = i + 1
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
	}
	d.fail("bad number")
	return 0
}

func (d *binDecoder) int() int64 {
	// Zig-zag: one byte holds -64 to 63.
	u := d.uint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *binDecoder) intN() int {
	v := d.int()
	if int64(int(v)) != v {
		d.fail("number overflows int")
		return 0
	}
	return int(v)
}

func (d *binDecoder) flag() bool {
	if d.err != nil {
		return false
	}
	if d.i >= len(d.b) {
		d.fail("unexpected end of the record")
		return false
	}
	c := d.b[d.i]
	d.i++
	if c > 1 {
		d.fail("bad flag")
	}
	return c == 1
}

// span returns the extent of a length-prefixed field.
func (d *binDecoder) span() (int, int) {
	n := d.uint()
	start := d.i
	if n > uint64(len(d.b)-start) {
		d.fail("field longer than the record")
		return 0, 0
	}
	d.i = start + int(n)
	return start, d.i
}

func (d *binDecoder) bytes() []byte {
	lo, hi := d.span()
	return d.b[lo:hi]
}

// str reads a string. A length of one byte (under 128, as most are) is
// read in place; a longer or bad one goes through span.
func (d *binDecoder) str() string {
	i := d.i
	if i >= len(d.b) || d.b[i] >= 0x80 || int(d.b[i]) > len(d.b)-i-1 {
		return d.strSpan()
	}
	lo, hi := i+1, i+1+int(d.b[i])
	d.i = hi
	// cut, by hand: this is the path of nearly every string.
	if v := d.b[lo:hi]; !ascii(v) && !utf8.Valid(v) {
		d.fail("invalid UTF-8 in string")
		return ""
	}
	if d.s == "" {
		return intern(d.b[lo:hi])
	}
	return d.s[lo:hi]
}

func (d *binDecoder) strSpan() string {
	lo, hi := d.span()
	if lo == hi {
		return ""
	}
	return d.cut(lo, hi)
}

// cut returns d.b[lo:hi] as a string: valid UTF-8 only.
func (d *binDecoder) cut(lo, hi int) string {
	if v := d.b[lo:hi]; !ascii(v) && !utf8.Valid(v) {
		d.fail("invalid UTF-8 in string")
		return ""
	}
	if d.s == "" {
		return intern(d.b[lo:hi])
	}
	// A substring costs nothing, and the constants intern would return
	// instead would not save the shared string (the record's other
	// strings keep it).
	return d.s[lo:hi]
}

// ascii reports whether b is all ASCII, eight bytes at a time: the
// strings of a record are tens of bytes, and checking them was a fifth
// of decoding one byte by byte (utf8.Valid costs a call more).
func ascii(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	if len(b) >= 4 {
		if binary.LittleEndian.Uint32(b)&0x80808080 != 0 {
			return false
		}
		b = b[4:]
	}
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// minUnix and maxUnix bound the seconds of a time RFC 3339 can write
// (years 0 to 9999).
var (
	minUnix = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxUnix = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
)

func (d *binDecoder) time() time.Time {
	if d.err != nil {
		return time.Time{}
	}
	if d.i >= len(d.b) {
		d.fail("unexpected end of the record")
		return time.Time{}
	}
	tag := d.b[d.i]
	d.i++
	switch tag {
	case timeZero:
		return time.Time{}
	case timeUTC:
		sec, nsec := d.int(), d.uint()
		if d.err == nil && (sec < minUnix || sec > maxUnix || nsec >= 1e9) {
			d.fail("time out of range")
		}
		if d.err != nil {
			return time.Time{}
		}
		return time.Unix(sec, int64(nsec)).UTC()
	case timeText:
		var t time.Time
		if text := d.bytes(); d.err == nil {
			if err := t.UnmarshalText(text); err != nil {
				d.fail(err.Error())
			} else if again, _ := t.AppendText(nil); string(again) != string(text) {
				// Only what the encoder writes: RFC 3339 as Go writes it,
				// with an offset (a UTC time has its own tag).
				d.fail("time not in its canonical form")
			}
		}
		return t
	default:
		d.fail("bad time tag")
		return time.Time{}
	}
}
