package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func sampleActivity() *Activity {
	return &Activity{
		Workflow: "order", Instance: "order-1001", Name: "charge_card",
		Generation: 2, DefHash: "abc", IdempotencyKey: "wf1-00",
		Status: StatusWaiting, Attempts: 3, RuleCounts: []int{1, 2},
		FirstStart: t0, LastDelay: 2 * time.Second,
		Timer: &Timer{Kind: TimerRetry, FireAt: t0.Add(4 * time.Second), Attempt: 4,
			Set: t0, Delay: 4 * time.Second, Source: "policy"},
		Outputs:   json.RawMessage(`{"result":{"id":"ch_1"}}`),
		LastError: &Error{Type: "http:503", Message: "unavailable"},
	}
}

func sampleAttempt() *Attempt {
	return &Attempt{
		Workflow: "order", Instance: "order-1001", Activity: "charge_card",
		Generation: 1, Number: 12, IdempotencyKey: "wf1-00",
		Start: t0, End: t0.Add(time.Second), Outcome: OutcomeFailed,
		Error: &Error{Type: "CardDeclined", NonRetryable: true},
		Wait:  time.Second, HasWait: true, WaitSource: "server", FiredBy: "manual",
		Output: &Output{Stdout: "charging\n", StdoutBytes: 9, Stderr: "declined\n", StderrBytes: 5000, Body: "{}", BodyBytes: 2},
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		in     any
		decode func([]byte) (any, error)
	}{
		{"instance", &Instance{Workflow: "order", Key: "a/b", Created: t0, Updated: t0.Add(time.Hour)},
			func(b []byte) (any, error) { return DecodeInstance(b) }},
		{"activity", sampleActivity(), func(b []byte) (any, error) { return DecodeActivity(b) }},
		{"activity minimal", &Activity{Workflow: "w", Instance: "k", Name: "n", Status: StatusPending},
			func(b []byte) (any, error) { return DecodeActivity(b) }},
		{"activity interrupted", &Activity{Workflow: "w", Instance: "k", Name: "n", Generation: 1, Status: StatusWaiting, Attempts: 2, Interrupted: 1},
			func(b []byte) (any, error) { return DecodeActivity(b) }},
		{"attempt", sampleAttempt(), func(b []byte) (any, error) { return DecodeAttempt(b) }},
		{"attempt running", &Attempt{Workflow: "w", Instance: "k", Activity: "a", Generation: 1, Number: 1, Start: t0, Outcome: OutcomeRunning},
			func(b []byte) (any, error) { return DecodeAttempt(b) }},
		{"budget", &Budget{Name: "payment_api", Stamps: []time.Time{t0, t0.Add(time.Second)}},
			func(b []byte) (any, error) { return DecodeBudget(b) }},
		{"activity waiting for its breaker", &Activity{Workflow: "w", Instance: "k", Name: "n", Generation: 1, Status: StatusWaiting, Attempts: 2,
			Timer: &Timer{Kind: TimerCircuit, FireAt: t0, Attempt: 3, Set: t0, Source: "circuit"}, HeartbeatDetails: "row 4200 of 10000"},
			func(b []byte) (any, error) { return DecodeActivity(b) }},
		{"breaker closed", &Breaker{Name: "payment_api", State: "closed", Since: t0, Window: []BreakerBucket{{Start: t0, Successes: 3}, {Start: t0.Add(time.Second), Successes: 1, Failures: 2}}, Epoch: 2},
			func(b []byte) (any, error) { return DecodeBreaker(b) }},
		{"breaker open", &Breaker{Name: "payment_api", State: "open", Since: t0, HalfOpenAt: t0.Add(30 * time.Second), Epoch: 3},
			func(b []byte) (any, error) { return DecodeBreaker(b) }},
		{"breaker half-open", &Breaker{Name: "payment_api", State: "half_open", Since: t0, TrialSuccesses: 1, Epoch: 4},
			func(b []byte) (any, error) { return DecodeBreaker(b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.in)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := tt.decode(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.in) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tt.in)
			}
		})
	}
}

func TestEncodeByValueMatchesPointer(t *testing.T) {
	a := sampleAttempt()
	p, err := Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Encode(*a)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, v) {
		t.Fatalf("by value %s != by pointer %s", v, p)
	}
}

func TestEncodeInvalid(t *testing.T) {
	neg := sampleActivity()
	neg.Generation = -1
	badStatus := sampleActivity()
	badStatus.Status = "exploded"
	badTimer := sampleActivity()
	badTimer.Timer.Kind = "alarm"
	negTimer := sampleActivity()
	negTimer.Timer.Attempt = -2
	negAttempts := sampleActivity()
	negAttempts.Attempts = -1
	negRule := sampleActivity()
	negRule.RuleCounts = []int{0, -1}
	noName := sampleActivity()
	noName.Name = ""
	tooInterrupted := sampleActivity()
	tooInterrupted.Interrupted = -1
	negNum := sampleAttempt()
	negNum.Number = -1
	negGen := sampleAttempt()
	negGen.Generation = -3
	badOutcome := sampleAttempt()
	badOutcome.Outcome = ""
	noAct := sampleAttempt()
	noAct.Activity = ""
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil instance", (*Instance)(nil), "nil record"},
		{"nil activity", (*Activity)(nil), "nil record"},
		{"nil attempt", (*Attempt)(nil), "nil record"},
		{"nil budget", (*Budget)(nil), "nil record"},
		{"unsupported", 42, "unsupported record type int"},
		{"instance no workflow", &Instance{Key: "k"}, "empty workflow name"},
		{"instance no key", Instance{Workflow: "w"}, "empty key"},
		{"activity negative generation", neg, "negative generation -1"},
		{"activity unknown status", badStatus, `unknown status "exploded"`},
		{"activity unknown timer kind", badTimer, `unknown timer kind "alarm"`},
		{"activity negative timer attempt", negTimer, "negative timer attempt"},
		{"activity negative attempts", negAttempts, "negative attempt count"},
		{"activity negative rule count", negRule, "negative count -1 for retry rule 1"},
		{"activity no name", noName, "empty workflow, instance or activity name"},
		{"activity negative interrupted count", tooInterrupted, "negative interrupted attempt count -1"},
		{"attempt negative number", negNum, "negative attempt number"},
		{"attempt negative generation", negGen, "negative generation -3"},
		{"attempt empty outcome", badOutcome, `unknown outcome ""`},
		{"attempt no activity", noAct, "empty workflow, instance or activity name"},
		{"budget no name", &Budget{}, "budget: empty name"},
		{"nil breaker", (*Breaker)(nil), "nil record"},
		{"breaker no name", &Breaker{State: "closed"}, "breaker: empty name"},
		{"breaker unknown state", Breaker{Name: "b", State: "ajar"}, `unknown state "ajar"`},
		{"breaker open without its end", &Breaker{Name: "b", State: "open"}, "open without a half-open time"},
		{"breaker negative epoch", &Breaker{Name: "b", State: "closed", Epoch: -1}, "negative count"},
		{"breaker negative window count", &Breaker{Name: "b", State: "closed", Window: []BreakerBucket{{Start: t0, Failures: -1}}}, "negative count in its window"},
		{"activity bad outputs", &Activity{Workflow: "w", Instance: "k", Name: "n", Status: StatusPending, Outputs: json.RawMessage("{")}, "encode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Encode(tt.in)
			if err == nil {
				t.Fatalf("Encode(%+v) succeeded, want error containing %q", tt.in, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestDecodeInvalid(t *testing.T) {
	tests := []struct {
		name   string
		decode func([]byte) error
		in     string
		want   string
	}{
		{"activity garbage", decAct, "\x00\x01", "decode activity"},
		{"activity empty", decAct, "", "decode activity"},
		{"activity unknown field", decAct, `{"workflow":"w","instance":"k","name":"n","status":"pending","colour":1}`, "unknown field"},
		{"activity trailing", decAct, `{"workflow":"w","instance":"k","name":"n","status":"pending"} {}`, "trailing data"},
		{"activity negative generation", decAct, `{"workflow":"w","instance":"k","name":"n","status":"pending","generation":-1}`, "negative generation"},
		{"activity unknown status", decAct, `{"workflow":"w","instance":"k","name":"n","status":"odd"}`, "unknown status"},
		{"activity timer kind", decAct, `{"workflow":"w","instance":"k","name":"n","status":"waiting","timer":{"kind":"x"}}`, "unknown timer kind"},
		{"activity wrong type", decAct, `{"workflow":1}`, "decode activity"},
		{"activity null", decAct, `null`, "empty workflow"},
		{"attempt negative number", decAtt, `{"workflow":"w","instance":"k","activity":"a","number":-5,"outcome":"failed"}`, "negative attempt number"},
		{"attempt unknown outcome", decAtt, `{"workflow":"w","instance":"k","activity":"a","number":1,"outcome":"meh"}`, "unknown outcome"},
		{"attempt overflow", decAtt, `{"workflow":"w","instance":"k","activity":"a","number":1e40,"outcome":"failed"}`, "decode attempt"},
		{"attempt bad time", decAtt, `{"workflow":"w","instance":"k","activity":"a","number":1,"outcome":"failed","start":"yesterday"}`, "decode attempt"},
		{"instance empty key", decInst, `{"workflow":"w","key":""}`, "empty key"},
		{"budget empty name", decBud, `{"name":"","stamps":[]}`, "empty name"},
		{"budget bad stamp", decBud, `{"name":"b","stamps":[3]}`, "decode budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("decode(%q) succeeded, want error containing %q", tt.in, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func decAct(b []byte) error  { _, err := DecodeActivity(b); return err }
func decAtt(b []byte) error  { _, err := DecodeAttempt(b); return err }
func decInst(b []byte) error { _, err := DecodeInstance(b); return err }
func decBud(b []byte) error  { _, err := DecodeBudget(b); return err }

// fuzzRoundTrip checks that whatever a decoder accepts, encoding/json
// accepts with the same result (the hand-written decoder is only ever
// stricter), that it re-encodes, and that the encoding is a fixed point:
// decode(encode(x)) encodes to the same bytes.
func fuzzRoundTrip[T any](t *testing.T, data []byte, decode func([]byte) (*T, error)) {
	r, err := decode(data)
	if err != nil {
		if r != nil {
			t.Fatalf("decoder returned a record and an error: %v", err)
		}
		return
	}
	std := new(T)
	js := data
	if len(data) > 0 && data[0] == activityBinaryV1 {
		// The binary form must hold what the JSON form of the same
		// record holds.
		if js, err = json.Marshal(r); err != nil {
			t.Fatalf("accepted binary record has no JSON form: %v\ninput %q", err, data)
		}
	}
	if err := json.Unmarshal(js, std); err != nil {
		t.Fatalf("decoder accepted what encoding/json refuses (%v): %q", err, data)
	}
	if !reflect.DeepEqual(r, std) {
		t.Fatalf("decoder and encoding/json disagree on %q:\n got %+v\n std %+v", data, r, std)
	}
	b1, err := Encode(r)
	if err != nil {
		t.Fatalf("accepted record does not encode: %v\ninput %q", err, data)
	}
	r2, err := decode(b1)
	if err != nil {
		t.Fatalf("encoded record does not decode: %v\nencoded %q", err, b1)
	}
	b2, err := Encode(r2)
	if err != nil {
		t.Fatalf("second encode: %v", err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("encoding is not stable:\n%s\n%s", b1, b2)
	}
}

func FuzzDecodeActivity(f *testing.F) {
	b, _ := Encode(sampleActivity())
	f.Add(b)
	f.Add([]byte(`{"workflow":"w","instance":"k","name":"n","status":"pending"}`))
	f.Add([]byte(`{"workflow":"w","instance":"k","name":"n","status":"waiting","timer":{"kind":"circuit","fire_at":"2026-01-01T00:00:00Z","attempt":2,"set":"2026-01-01T00:00:00Z","delay":0,"source":"circuit"},"heartbeat_details":"row 7"}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeActivity) })
}

func FuzzDecodeAttempt(f *testing.F) {
	b, _ := Encode(sampleAttempt())
	f.Add(b)
	f.Add([]byte(`{"workflow":"w","instance":"k","activity":"a","generation":1,"number":1,"outcome":"running"}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeAttempt) })
}

func FuzzDecodeInstance(f *testing.F) {
	f.Add([]byte(`{"workflow":"order","key":"order-1","created":"2026-01-01T00:00:00Z","updated":"2026-01-01T00:00:01Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeInstance) })
}

func FuzzDecodeBudget(f *testing.F) {
	f.Add([]byte(`{"name":"api","stamps":["2026-01-01T00:00:00Z","2026-01-01T00:00:01.5Z"]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeBudget) })
}

func FuzzDecodeBreaker(f *testing.F) {
	f.Add([]byte(`{"name":"api","state":"closed","since":"2026-01-01T00:00:00Z","window":[{"start":"2026-01-01T00:00:00Z","successes":3,"failures":1}],"epoch":2}`))
	f.Add([]byte(`{"name":"api","state":"open","since":"2026-01-01T00:00:00Z","half_open_at":"2026-01-01T00:00:30Z","epoch":3}`))
	f.Add([]byte(`{"name":"api","state":"half_open","trial_successes":1,"epoch":4}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeBreaker) })
}

func BenchmarkDecodeActivity(b *testing.B) {
	data, err := Encode(sampleActivity())
	if err != nil {
		b.Fatal(err)
	}
	benchDecodeActivity(b, data)
}

// BenchmarkDecodeActivityJSON: the same record as an older wf stored it.
func BenchmarkDecodeActivityJSON(b *testing.B) {
	data, err := json.Marshal(sampleActivity())
	if err != nil {
		b.Fatal(err)
	}
	benchDecodeActivity(b, data)
}

func benchDecodeActivity(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeActivity(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalActivity(b *testing.B) {
	data, err := Encode(sampleActivity())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var a Activity
		if err := json.Unmarshal(data, &a); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecoderAgreesWithStdlib covers what the hand-written decoder must
// read exactly like encoding/json, and what it refuses although
// encoding/json would take it.
func TestDecoderAgreesWithStdlib(t *testing.T) {
	const base = `"workflow":"w","instance":"k","activity":"a","number":1,"outcome":"failed"`
	tests := []struct {
		name   string
		in     string
		strict string // non-empty: the decoder refuses, with this in the error
	}{
		{"whitespace", " {\n\t" + `"workflow" : "w" , "instance":"k","activity":"a","number":1,"outcome":"failed"` + " } \n", ""},
		{"escapes", `{` + base + `,"fired_by":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20ac"}`, ""},
		{"surrogate pair", `{` + base + `,"fired_by":"\ud83d\ude00"}`, ""},
		{"lone surrogate", `{` + base + `,"fired_by":"x\ud83dy"}`, ""},
		{"surrogate then escape", `{` + base + `,"fired_by":"\ud83d\u0041"}`, ""},
		{"escaped field name", `{"work\u0066low":"w","instance":"k","activity":"a","number":1,"outcome":"failed"}`, ""},
		{"nulls", `{` + base + `,"error":null,"wait":null,"has_wait":null,"start":null,"fired_by":null}`, ""},
		{"error object", `{` + base + `,"error":{"type":"exit:1","message":"m","non_retryable":false}}`, ""},
		{"negative zero", `{` + base + `,"generation":-0}`, ""},
		{"big wait", `{` + base + `,"wait":9223372036854775807}`, ""},
		{"utf8", `{` + base + `,"fired_by":"héllo ✓"}`, ""},
		{"case-insensitive name", `{"Workflow":"w","instance":"k","activity":"a","number":1,"outcome":"failed"}`, "unknown field"},
		{"duplicate field", `{` + base + `,"number":2}`, "duplicate field"},
		{"fraction", `{` + base + `,"generation":1.0}`, "not a fraction"},
		{"invalid utf8", "{" + base + ",\"fired_by\":\"\xff\"}", "invalid UTF-8"},
		{"control char", "{" + base + ",\"fired_by\":\"a\x01\"}", "control character"},
		{"bad escape", `{` + base + `,"fired_by":"\x"}`, "bad escape"},
		{"leading zero", `{` + base + `,"generation":01}`, "leading zero"},
		{"trailing comma", `{` + base + `,}`, "offset"},
		{"unterminated", `{` + base, "offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeAttempt([]byte(tt.in))
			if tt.strict != "" {
				if err == nil || !strings.Contains(err.Error(), tt.strict) {
					t.Fatalf("DecodeAttempt(%q) = %v, want an error containing %q", tt.in, err, tt.strict)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeAttempt(%q): %v", tt.in, err)
			}
			var want Attempt
			if err := json.Unmarshal([]byte(tt.in), &want); err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("got %+v\nstd %+v", got, want)
			}
		})
	}
}

func TestDecodeOutputsKeepsRawJSON(t *testing.T) {
	in := `{"workflow":"w","instance":"k","name":"n","status":"succeeded","outputs":{"a": [1, -2.5e3, true, null, "x\u00e9", {"b": {}}]}}`
	a, err := DecodeActivity([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a": [1, -2.5e3, true, null, "x\u00e9", {"b": {}}]}`; string(a.Outputs) != want {
		t.Fatalf("outputs %s, want %s", a.Outputs, want)
	}
	deep := `{"workflow":"w","instance":"k","name":"n","status":"succeeded","outputs":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`
	if _, err := DecodeActivity([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Fatalf("deep outputs: %v", err)
	}
}

// fill sets every field of v to a distinct non-zero value, so that a field
// added to a record type but not to the hand-written decoder is caught.
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(t0.Add(time.Duration(*n) * time.Second)))
		return
	case reflect.TypeFor[time.Duration]():
		v.SetInt(int64(*n) * int64(time.Millisecond))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(fmt.Sprintf(`{"n":%d}`, *n)))
		return
	case reflect.TypeFor[Status]():
		v.SetString(string(StatusWaiting))
		return
	case reflect.TypeFor[Outcome]():
		v.SetString(string(OutcomeFailed))
		return
	case reflect.TypeFor[TimerKind]():
		v.SetString(string(TimerBudget))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0), n)
		fill(t, v.Index(1), n)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fill: no rule for %s (%s): teach fill and the decoder about it", v.Type(), v.Kind())
	}
}

func TestDecoderKnowsEveryField(t *testing.T) {
	tests := []struct {
		rec    any
		decode func([]byte) (any, error)
	}{
		{&Instance{}, func(b []byte) (any, error) { return DecodeInstance(b) }},
		{&Activity{}, func(b []byte) (any, error) { return DecodeActivity(b) }},
		{&Attempt{}, func(b []byte) (any, error) { return DecodeAttempt(b) }},
		{&Budget{}, func(b []byte) (any, error) { return DecodeBudget(b) }},
		{&Breaker{}, func(b []byte) (any, error) { return DecodeBreaker(b) }},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T", tt.rec), func(t *testing.T) {
			n := 0
			fill(t, reflect.ValueOf(tt.rec).Elem(), &n)
			if br, ok := tt.rec.(*Breaker); ok {
				br.State = "open" // an enum: fill's strings are not states
			}
			b, err := Encode(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.decode(b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if !reflect.DeepEqual(got, tt.rec) {
				t.Fatalf("round trip lost data:\n got %+v\nwant %+v", got, tt.rec)
			}
		})
	}
}

func TestDecodeBreakerRefusesUnknownFields(t *testing.T) {
	for _, in := range []string{
		`{"name":"b","state":"closed","colour":"red"}`,
		`{"name":"b","state":"closed"} {}`,
		`{"name":"b","state":"shut"}`,
	} {
		if _, err := DecodeBreaker([]byte(in)); err == nil {
			t.Errorf("DecodeBreaker(%s) succeeded", in)
		}
	}
}

func TestDecodeSpawnRefusesTrailingData(t *testing.T) {
	good := `{"workflow":"w","instance":"k","activity":"a","generation":1,"number":1,"pid":7,"start_ticks":1,"boot_id":"b","recorded":"2026-12-01T00:00:00Z"}`
	if _, err := DecodeSpawn([]byte(good + "\n")); err != nil {
		t.Fatalf("valid spawn refused: %v", err)
	}
	for _, tail := range []string{"}", "]", "{}", " x", `"s"`} {
		if _, err := DecodeSpawn([]byte(good + tail)); err == nil {
			t.Errorf("spawn followed by %q was accepted", tail)
		}
	}
}
