package record

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// appendJSONTimeWant is what appendJSONTime must write: json.Marshal of
// the time (AppendText, quoted), or its error.
func appendJSONTimeWant(t time.Time) ([]byte, error) {
	return json.Marshal(t)
}

func checkJSONTime(t *testing.T, tm time.Time) {
	t.Helper()
	want, wantErr := appendJSONTimeWant(tm)
	got, err := appendJSONTime([]byte("x"), tm)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%v (%d s, %d ns, zone %v): error %v, json.Marshal's %v", tm, tm.Unix(), tm.Nanosecond(), tm.Location(), err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("%d s, %d ns, zone %v: wrote %s, json.Marshal %s", tm.Unix(), tm.Nanosecond(), tm.Location(), got[1:], want)
	}
}

var testZones = []*time.Location{
	time.UTC,
	time.Local,
	time.FixedZone("", 0),
	time.FixedZone("P", 3600),
	time.FixedZone("N", -5*3600-30*60),
	time.FixedZone("IN", 5*3600+30*60),
	time.FixedZone("NP", 5*3600+45*60),
	time.FixedZone("max", 23*3600+59*60),
	time.FixedZone("min", -(23*3600 + 59*60)),
	time.FixedZone("day", 24*3600),         // AppendText refuses it
	time.FixedZone("sec", 3600+30),         // seconds in the offset: left to AppendText
	time.FixedZone("negsec", -(3600 + 59)), // likewise
	time.FixedZone("big", 48*3600),
}

// TestAppendJSONTimeAsMarshal: the hand-written RFC 3339 writes exactly
// what json.Marshal writes, on the edges (epoch, leap days, centuries,
// year 9999 and 10000, before 1970 and year 0, the zero time, trailing
// zeros of the nanoseconds) in every zone of testZones.
func TestAppendJSONTimeAsMarshal(t *testing.T) {
	var times []time.Time
	for _, d := range []time.Time{
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Unix(-1, 999999999),
		{},
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1972, 2, 29, 12, 0, 0, 0, time.UTC),
		time.Date(2000, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(2000, 3, 1, 0, 0, 0, 100, time.UTC),
		time.Date(2100, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 2, 6, 6, 35, 745892927, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 120000000, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 10, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 100000000, time.UTC),
		time.Date(2400, 2, 29, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 23, 0, 0, 0, time.UTC),
		time.Now(),
		time.Now().Round(0),
	} {
		times = append(times, d, d.Add(-time.Nanosecond), d.Add(time.Nanosecond))
	}
	for _, d := range times {
		for _, loc := range testZones {
			checkJSONTime(t, d.In(loc))
		}
	}
}

// TestAppendJSONTimeRandom: the same on random times over the whole range
// AppendText accepts and beyond, with random nanoseconds (a third of them
// with trailing zeros), in every zone of testZones.
func TestAppendJSONTimeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const lo, hi = -62167219200 - 2*86400, 253402300800 + 2*86400 // years -1 to 10000
	n := 200000
	if testing.Short() {
		n = 20000
	}
	for i := range n {
		sec := lo + r.Int64N(hi-lo)
		if i%4 == 0 {
			// Most of what wf writes: around now.
			sec = 1.7e9 + r.Int64N(1e9)
		}
		ns := r.Int64N(1e9)
		switch i % 3 {
		case 0:
			ns = ns / 1000 * 1000
		case 1:
			ns = ns / 1e6 * 1e6
		}
		checkJSONTime(t, time.Unix(sec, ns).In(testZones[i%len(testZones)]))
	}
}

func FuzzAppendJSONTime(f *testing.F) {
	f.Add(int64(0), int64(0), 0)
	f.Add(int64(1764655595), int64(745892927), 0)
	f.Add(int64(253402300799), int64(999999999), -3600)
	f.Add(int64(-1), int64(0), 19800)
	f.Add(int64(1764655595), int64(100), 86400)
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int) {
		loc := time.UTC
		if offset != 0 {
			loc = time.FixedZone("F", offset%(50*3600))
		}
		checkJSONTime(t, time.Unix(sec, nsec).In(loc))
	})
}

func BenchmarkAppendJSONTime(b *testing.B) {
	tm := time.Date(2026, 12, 2, 6, 6, 35, 745892927, time.UTC)
	buf := make([]byte, 0, 64)
	for _, c := range []struct {
		name string
		t    time.Time
	}{{"UTC", tm}, {"Local", tm.In(time.Local)}, {"Fixed", tm.In(time.FixedZone("IN", 19800))}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				buf, _ = appendJSONTime(buf[:0], c.t)
			}
		})
		b.Run(c.name+"/AppendText", func(b *testing.B) {
			for b.Loop() {
				buf, _ = c.t.AppendText(buf[:0])
			}
		})
	}
}
