package record

import "time"

// appendJSONTime appends t as json.Marshal writes a time.Time: quoted,
// in the bytes time.Time.AppendText writes (RFC 3339 with nanoseconds,
// trailing zeros trimmed).
//
// Every attempt record carries two times, and in a crowd of committing
// callers AppendText was about half of an attempt's encoding (its zone
// lookup, its per-field appendInt and its strict re-check of what it
// wrote). appendRFC3339 writes the same bytes directly for the times wf
// writes (1970 to 9999, offsets of whole minutes under a day); any other
// time goes through AppendText itself, so the format cannot differ (the
// tests compare the two on random and edge-case times, and a fuzz target
// keeps doing so).
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	if fast, ok := appendRFC3339(b, t); ok {
		return append(fast, '"'), nil
	}
	b, err := t.AppendText(b)
	if err != nil {
		return b, err
	}
	return append(b, '"'), nil
}

// maxFastUnix is the first second of year 10000: AppendText refuses it.
const maxFastUnix = 253402300800

// twoDigits holds "00" to "99".
const twoDigits = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendRFC3339 appends t as time.Time.AppendText does and reports true,
// or appends nothing and reports false for a time it leaves to
// AppendText: before 1970 or from year 10000 in its own zone, or in a
// zone whose offset is not a whole number of minutes under 24 hours.
func appendRFC3339(b []byte, t time.Time) ([]byte, bool) {
	offset := 0
	if loc := t.Location(); loc != time.UTC {
		_, offset = t.Zone()
		if offset%60 != 0 || offset <= -24*3600 || offset >= 24*3600 {
			return b, false
		}
	}
	sec := t.Unix() + int64(offset)
	if sec < 0 || sec >= maxFastUnix {
		return b, false
	}
	days := sec / 86400
	clock := int(sec - days*86400)
	year, month, day := civil(days)

	var buf [36]byte // 2006-01-02T15:04:05.999999999-07:00
	putDigits2(buf[0:], year/100)
	putDigits2(buf[2:], year%100)
	buf[4] = '-'
	putDigits2(buf[5:], month)
	buf[7] = '-'
	putDigits2(buf[8:], day)
	buf[10] = 'T'
	putDigits2(buf[11:], clock/3600)
	buf[13] = ':'
	putDigits2(buf[14:], clock/60%60)
	buf[16] = ':'
	putDigits2(buf[17:], clock%60)
	n := 19
	if ns := t.Nanosecond(); ns != 0 {
		// Nine digits, then the trailing zeros trimmed, as AppendText.
		buf[n] = '.'
		buf[n+1] = byte('0' + ns/1e8)
		ns %= 1e8
		hi, lo := ns/10000, ns%10000
		putDigits2(buf[n+2:], hi/100)
		putDigits2(buf[n+4:], hi%100)
		putDigits2(buf[n+6:], lo/100)
		putDigits2(buf[n+8:], lo%100)
		n += 10
		for buf[n-1] == '0' {
			n--
		}
	}
	if offset == 0 {
		buf[n] = 'Z'
		n++
	} else {
		zone := offset / 60
		buf[n] = '+'
		if zone < 0 {
			buf[n] = '-'
			zone = -zone
		}
		putDigits2(buf[n+1:], zone/60)
		buf[n+3] = ':'
		putDigits2(buf[n+4:], zone%60)
		n += 6
	}
	return append(b, buf[:n]...), true
}

// putDigits2 writes v (0 to 99) as two digits.
func putDigits2(b []byte, v int) {
	b[0] = twoDigits[2*v]
	b[1] = twoDigits[2*v+1]
}

// civil returns the proleptic Gregorian date of days since 1970-01-01
// (days >= 0), by the algorithm of Howard Hinnant's "chrono-compatible
// low-level date algorithms" (civil_from_days), in eras of 400 years
// counted from 0000-03-01.
func civil(days int64) (year, month, day int) {
	z := days + 719468
	era := z / 146097
	doe := z - era*146097                                  // day of the era, 0 to 146096
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of the era, 0 to 399
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of the year from March 1, 0 to 365
	mp := (5*doy + 2) / 153                                // month from March, 0 to 11
	day = int(doy - (153*mp+2)/5 + 1)
	month = int(mp) + 3
	if month > 12 {
		month -= 12
	}
	year = int(yoe + era*400)
	if month <= 2 {
		year++
	}
	return year, month, day
}
