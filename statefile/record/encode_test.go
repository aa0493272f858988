package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// strs are strings that exercise every escaping rule of encoding/json.
var strs = []string{
	"", "plain", "with space", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr",
	"\b\f\x00\x01\x1f\x7f", "héllo wörld ✓", "\u2028 and \u2029", "bad \xff utf8 \xe2\x80", "emoji 🎉",
	"wf2-0123456789abcdef0123456789abcdef",
}

var raws = []string{
	`{"stdout":"","stderr":"","exit_code":0,"result":null}`,
	"{ \"a\" : [ 1 , 2 ,\n 3 ] ,\t\"b\" : \"x y <z> & \u2028\" }",
	`{"s":"esc \" \\ \u003c"}`,
	`[]`, `null`, `"just a string"`, `12.5e3`,
}

var zones = []*time.Location{time.UTC, time.FixedZone("X", 5*3600+30*60), time.FixedZone("Y", -7*3600), time.Local}

func randTime(r *rand.Rand) time.Time {
	switch r.IntN(5) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(r.Int64N(4e9), 0).In(zones[r.IntN(len(zones))])
	}
	return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
}

func randStr(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	return strs[r.IntN(len(strs))]
}

func randError(r *rand.Rand) *Error {
	if r.IntN(2) == 0 {
		return nil
	}
	return &Error{Type: randStr(r), Message: randStr(r), NonRetryable: r.IntN(2) == 0}
}

func randActivity(r *rand.Rand) *Activity {
	a := &Activity{
		Workflow: randStr(r), Instance: randStr(r), Name: randStr(r),
		Generation: r.IntN(5), DefHash: randStr(r), IdempotencyKey: randStr(r),
		Status: Status(randStr(r)), Attempts: r.IntN(100) - 10, Interrupted: r.IntN(3),
		FirstStart: randTime(r), LastDelay: time.Duration(r.Int64N(1e12) - 1e11),
		LastError: randError(r), FailReason: randStr(r), Finished: randTime(r),
		HeartbeatDetails: randStr(r),
	}
	for range r.IntN(4) {
		a.RuleCounts = append(a.RuleCounts, r.IntN(10)-2)
	}
	if r.IntN(5) == 0 {
		a.RuleCounts = []int{}
	}
	if r.IntN(2) == 0 {
		a.Timer = &Timer{Kind: TimerKind(randStr(r)), FireAt: randTime(r), Attempt: r.IntN(9), Set: randTime(r), Delay: time.Duration(r.Int64N(1e12)), Source: randStr(r)}
	}
	if r.IntN(2) == 0 {
		a.Outputs = json.RawMessage(raws[r.IntN(len(raws))])
	}
	return a
}

func randAttempt(r *rand.Rand) *Attempt {
	return &Attempt{
		Workflow: randStr(r), Instance: randStr(r), Activity: randStr(r),
		Generation: r.IntN(5), Number: r.IntN(1000), IdempotencyKey: randStr(r),
		Start: randTime(r), End: randTime(r), Outcome: Outcome(randStr(r)), Error: randError(r),
		Wait: time.Duration(r.Int64N(1e12)), HasWait: r.IntN(2) == 0, WaitSource: randStr(r), FiredBy: randStr(r),
		Output: randOutput(r),
	}
}

// randOutput is nil a third of the time, else any subset of its fields.
func randOutput(r *rand.Rand) *Output {
	if r.IntN(3) == 0 {
		return nil
	}
	n := func() int {
		if r.IntN(2) == 0 {
			return 0
		}
		return r.IntN(1 << 20)
	}
	return &Output{Stdout: randStr(r), StdoutBytes: n(), Stderr: randStr(r), StderrBytes: n(), Body: randStr(r), BodyBytes: n()}
}

// TestEncodersMatchEncodingJSON: the hand-written encoders produce the
// same bytes as json.Marshal, so stored records do not change.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(v any, got []byte, err error) {
		t.Helper()
		want, werr := json.Marshal(v)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%+v: error %v, json.Marshal %v", v, err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("encoded\n%s\njson.Marshal\n%s", got, want)
		}
	}
	for range 5000 {
		at := randAttempt(r)
		got, err := appendAttempt(nil, at)
		check(at, got, err)
		in := &Instance{Workflow: randStr(r), Key: randStr(r), Created: randTime(r), Updated: randTime(r)}
		got, err = appendInstance(nil, in)
		check(in, got, err)
		sp := &Spawn{Workflow: randStr(r), Instance: randStr(r), Activity: randStr(r), Generation: r.IntN(9), Number: r.IntN(9), PID: r.IntN(1 << 22), StartTicks: r.Uint64(), BootID: randStr(r), Recorded: randTime(r)}
		got, err = appendSpawn(nil, sp)
		check(sp, got, err)
	}
	// What json.Marshal refuses, the encoders refuse.
	far := &Attempt{Start: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	got, err := appendAttempt(nil, far)
	check(far, got, err)
}

// sameAsJSON checks that the binary form of a decodes to what its JSON
// form decodes to (no validation: random records are often invalid), and
// that the binary encoder refuses what json.Marshal refuses.
func sameAsJSON(t *testing.T, a *Activity) {
	t.Helper()
	bin, err := appendActivityBinary(nil, a)
	js, jerr := json.Marshal(a)
	if (err != nil) != (jerr != nil) {
		t.Fatalf("%+v: binary encoder error %v, json.Marshal %v", a, err, jerr)
	}
	if err != nil {
		return
	}
	var fromJSON, fromBin Activity
	if err := decodeActivity(js, &fromJSON); err != nil {
		t.Fatalf("JSON form does not decode: %v\n%s", err, js)
	}
	if err := decodeActivityBinary(bin, "", &fromBin, nil); err != nil {
		t.Fatalf("binary form does not decode: %v\n%q", err, bin)
	}
	if !reflect.DeepEqual(fromBin, fromJSON) {
		t.Fatalf("the two forms decode differently:\nbinary %+v\nJSON   %+v\nfrom %s", fromBin, fromJSON, js)
	}
	// Encoding what was decoded gives the same bytes again.
	again, err := appendActivityBinary(nil, &fromBin)
	if err != nil || !bytes.Equal(again, bin) {
		t.Fatalf("binary form not stable (%v):\n%q\n%q", err, bin, again)
	}
}

// TestActivityBinaryMatchesJSON: on random activities (every escaping
// rule, invalid UTF-8, time zones, zero times, odd outputs), the binary
// form holds what the JSON form holds.
func TestActivityBinaryMatchesJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		sameAsJSON(t, randActivity(r))
	}
	for _, a := range []*Activity{
		{Outputs: json.RawMessage(`{"a":`)},
		{Finished: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Timer: &Timer{FireAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.FixedZone("X", 3600))}},
		{Timer: &Timer{Set: time.Time{}.In(time.FixedZone("Y", -7200))}},
		{Outputs: json.RawMessage(`null`), RuleCounts: []int{}},
	} {
		sameAsJSON(t, a)
	}
}

// TestOldJSONActivitiesDecode: an activity as an older wf stored it (JSON)
// decodes as before.
func TestOldJSONActivitiesDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		a := randActivity(r)
		a.Workflow, a.Instance, a.Name, a.Status = "w", "k", "n", StatusWaiting
		if a.Timer != nil {
			a.Timer.Kind = TimerRetry
		}
		a.Attempts, a.Generation, a.RuleCounts = max(a.Attempts, 0), max(a.Generation, 0), nil
		js, err := json.Marshal(a)
		if err != nil {
			continue
		}
		var want Activity
		if err := json.Unmarshal(js, &want); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeActivity(js)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	}
}

// TestEncodersKnowEveryField: with every field of a record set, the
// hand-written encoder still writes what json.Marshal writes, so a field
// added to a record cannot be dropped by an encoder that does not know it.
func TestEncodersKnowEveryField(t *testing.T) {
	tests := []struct {
		rec    any
		encode func(any) ([]byte, error)
	}{
		{&Instance{}, func(v any) ([]byte, error) { return appendInstance(nil, v.(*Instance)) }},
		{&Attempt{}, func(v any) ([]byte, error) { return appendAttempt(nil, v.(*Attempt)) }},
		{&Spawn{}, func(v any) ([]byte, error) { return appendSpawn(nil, v.(*Spawn)) }},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T", tt.rec), func(t *testing.T) {
			n := 0
			fill(t, reflect.ValueOf(tt.rec).Elem(), &n)
			got, err := tt.encode(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%s\njson.Marshal\n%s", got, want)
			}
		})
	}
	t.Run("*record.Activity", func(t *testing.T) {
		a := &Activity{}
		n := 0
		fill(t, reflect.ValueOf(a).Elem(), &n)
		sameAsJSON(t, a)
	})
}

func FuzzEncodeActivity(f *testing.F) {
	f.Add("w", "k", "a", "h\u2028<", `{"x": [1, 2]}`, int64(0), int64(5), 0)
	f.Add("w", "k", "a", "bad \xff", `null`, int64(-62135596800), int64(0), 3600)
	f.Fuzz(func(t *testing.T, w, k, name, msg, outputs string, sec, nsec int64, zone int) {
		loc := time.UTC
		if zone != 0 {
			// Whole minutes: an offset with seconds reads back from
			// JSON in a zone of offset 0, from the binary form in UTC.
			loc = time.FixedZone("Z", zone%(24*60)*60)
		}
		a := &Activity{Workflow: w, Instance: k, Name: name, FailReason: msg, LastError: &Error{Type: msg, Message: w},
			Outputs: json.RawMessage(outputs), Finished: time.Unix(sec, nsec).In(loc), Timer: &Timer{Source: msg, FireAt: time.Unix(nsec, sec).In(loc)}}
		sameAsJSON(t, a)
	})
}

func BenchmarkEncodeAttempt(b *testing.B) {
	a := &Attempt{Workflow: "orders", Instance: "default", Activity: "charge", Generation: 1, Number: 3,
		IdempotencyKey: "wf2-0123456789abcdef0123456789abcdef", Start: time.Now(), End: time.Now(), Outcome: OutcomeFailed,
		Error: &Error{Type: "http:503", Message: "HTTP/1.1 503 Service Unavailable"}, Wait: time.Second, HasWait: true, WaitSource: "policy"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalAttempt(b *testing.B) {
	a := &Attempt{Workflow: "orders", Instance: "default", Activity: "charge", Generation: 1, Number: 3,
		IdempotencyKey: "wf2-0123456789abcdef0123456789abcdef", Start: time.Now(), End: time.Now(), Outcome: OutcomeFailed,
		Error: &Error{Type: "http:503", Message: "HTTP/1.1 503 Service Unavailable"}, Wait: time.Second, HasWait: true, WaitSource: "policy"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(a); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEncodeSizesHoldTypicalRecords: the buffer Encode starts with holds
// the records every attempt writes (an http attempt's, an exec failure's
// with a long message) without growing, and is not more than twice their
// size.
func TestEncodeSizesHoldTypicalRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 6, 35, 745892927, time.UTC)
	outputs := json.RawMessage(`{"status":200,"headers":{"Content-Length":"11","Content-Type":"application/json","Date":"Wed, 02 Dec 2026 06:06:35 GMT"},"body":"{\"ok\":true}","result":{"ok":true},"body_truncated":false}`)
	base := Activity{Workflow: "get", Instance: "default", Name: "h5", Generation: 1,
		DefHash: "8ba2e6494ddda8490e402eef23507e4d6a40a2b4f32cd03f52f50b39bd7cabfe", IdempotencyKey: "wf2-647ef0761a46e3997d41e26092bfa635",
		Status: StatusPending}
	running := base
	running.Status, running.Attempts, running.FirstStart = StatusRunning, 1, t0
	succeeded := running
	succeeded.Status, succeeded.Outputs, succeeded.Finished = StatusSucceeded, outputs, t0.Add(time.Second)
	waiting := running
	waiting.Status, waiting.RuleCounts, waiting.LastDelay = StatusWaiting, []int{1, 0}, time.Second
	waiting.Timer = &Timer{Kind: TimerRetry, FireAt: t0.Add(time.Second), Attempt: 2, Set: t0, Delay: time.Second, Source: "policy"}
	waiting.LastError = &Error{Type: "http:503", Message: "HTTP/1.1 503 Service Unavailable: try again"}
	att := Attempt{Workflow: "get", Instance: "default", Activity: "h5", Generation: 1, Number: 1,
		IdempotencyKey: "wf2-647ef0761a46e3997d41e26092bfa635", Start: t0, Outcome: OutcomeRunning}
	done := att
	done.End, done.Outcome, done.Output = t0.Add(time.Second), OutcomeSucceeded, &Output{Body: `{"ok":true}`, BodyBytes: 11}
	failed := att
	failed.End, failed.Outcome, failed.Wait, failed.HasWait, failed.WaitSource = t0.Add(time.Second), OutcomeFailed, time.Second, true, "policy"
	failed.Error = &Error{Type: "exit:1", Message: strings.Repeat("the command failed: ", 20)}
	failed.Output = &Output{Stdout: strings.Repeat("line of output\n", 40), StdoutBytes: 600, Stderr: "error: it broke\n", StderrBytes: 16}
	tests := []struct {
		name string
		rec  any
		size int
	}{
		{"pending activity", &base, activityBinarySize(&base)},
		{"running activity", &running, activityBinarySize(&running)},
		{"succeeded activity", &succeeded, activityBinarySize(&succeeded)},
		{"waiting activity", &waiting, activityBinarySize(&waiting)},
		{"running attempt", &att, attemptJSONSize(&att)},
		{"succeeded attempt", &done, attemptJSONSize(&done)},
		{"failed attempt", &failed, attemptJSONSize(&failed)},
	}
	for _, tt := range tests {
		b, err := Encode(tt.rec)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(b) > tt.size || tt.size > 2*len(b) {
			t.Errorf("%s: %d bytes in a buffer sized %d", tt.name, len(b), tt.size)
		}
		if cap(b) != tt.size {
			t.Errorf("%s: the buffer grew from %d to %d", tt.name, tt.size, cap(b))
		}
	}
}
